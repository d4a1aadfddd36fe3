#!/usr/bin/env python3
"""How far bf16 mixed precision moves a first training step's gradients from fp32's, in PyTorch:
the calibration of tests/test_onednn.c's bf16 limits (needs torch; not run by `make test`).

For lenet (3x28x28, batch 16) and a resnet of tests/test_onednn.c's small_resnet structure (the
stem, five basic blocks of widths 16, 16, 32, 64, 128, on 32x32, batch 8), Glorot-initialised,
on random inputs in [-1, 1] and random labels: the gradients of one step in fp32 and under
torch.autocast("cpu", dtype=torch.bfloat16), compared per parameter tensor as the test does
(Euclidean norm of the difference over the fp32 tensor's norm; the largest element difference
over the largest element). Prints per seed the worst tensor, the median tensor and the worst
element error.

  scripts/bf16_spread_torch.py [--seeds=5] [--threads=2]
"""
import argparse
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.dont_write_bytecode = True  # no __pycache__ in scripts/
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fashion_mnist_torch import lenet  # noqa: E402


def conv_bn(cin, cout, k, stride, relu=True):
    layers = [nn.Conv2d(cin, cout, k, stride, k // 2, bias=False), nn.BatchNorm2d(cout)]
    return nn.Sequential(*(layers + ([nn.ReLU()] if relu else [])))


class Block(nn.Module):
    """relu(conv-bn-relu, conv-bn + shortcut): identity, 1x1/2 max-pool subsampling or projection"""

    def __init__(self, cin, width, stride):
        super().__init__()
        self.a = conv_bn(cin, width, 3, stride)
        self.b = conv_bn(width, width, 3, 1, relu=False)
        if cin != width:
            self.sc = conv_bn(cin, width, 1, stride, relu=False)
        else:
            self.sc = nn.MaxPool2d(1, stride) if stride > 1 else nn.Identity()

    def forward(self, x):
        return F.relu(self.b(self.a(x)) + self.sc(x))


def small_resnet(num_classes=10):
    return nn.Sequential(conv_bn(3, 16, 7, 2), nn.MaxPool2d(3, 2, 1), Block(16, 16, 1), Block(16, 16, 2),
                         Block(16, 32, 1), Block(32, 64, 2), Block(64, 128, 1), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                         nn.Linear(128, num_classes))


def spread(model, n, size, seed):
    torch.manual_seed(seed)
    for m in model.modules():
        if isinstance(m, (nn.Conv2d, nn.Linear)):
            nn.init.xavier_uniform_(m.weight)
            if m.bias is not None:
                nn.init.zeros_(m.bias)
    x = torch.rand(n, 3, size, size) * 2 - 1
    y = torch.randint(0, 10, (n,))
    grads = []
    for bf16 in (False, True):
        model.zero_grad()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            out = model(x)
        F.cross_entropy(out.float(), y).backward()
        grads.append([p.grad.clone() for p in model.parameters()])
    l2 = [((a - b).norm() / b.norm()).item() for a, b in zip(grads[1], grads[0])]
    mx = [((a - b).abs().max() / b.abs().max()).item() for a, b in zip(grads[1], grads[0])]
    return max(l2), sorted(l2)[len(l2) // 2], max(mx)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--seeds", type=int, default=5)
    p.add_argument("--threads", type=int, default=2)
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    print("PyTorch %s: first-step gradients under autocast bf16 against fp32, per tensor" % torch.__version__)
    for name, make, n, size in (("lenet 28x28, batch 16", lenet, 16, 28),
                                ("resnet (widths/4) 32x32, batch 8", small_resnet, 8, 32)):
        model = make(10)
        for seed in range(a.seeds):
            worst, median, element = spread(model, n, size, seed)
            print("%-34s seed %d: worst tensor %.3f (l2), median tensor %.3f (l2), worst element %.3f (max)" %
                  (name, seed, worst, median, element))


if __name__ == "__main__":
    main()
