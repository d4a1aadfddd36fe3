#!/usr/bin/env python3
"""PyTorch peer of scripts/fashion_mnist.sh: trains nvcnn's lenet on Fashion-MNIST with the same
recipe and the same augmentation semantics, data held in memory, and evaluates on the 10,000 test
images after every epoch. Used by scripts/bench_tta.sh (time to accuracy) and for the seed tables
of docs/performance.md; never by `make test`. Needs torch and numpy (no torchvision).

  scripts/fashion_mnist_torch.py [--num_epochs=5] [--seed=1] [--target_top1=91.6] [recipe flags]

The recipe flags are nvcnn's (--batch_size, --learning_rate, --momentum, --nonesterov,
--weight_decay, --lr_poly_power, --warmup_epochs, --crop_area_min, --num_epochs, --seed,
--eval_every_epochs, --target_top1): scripts/bench_tta.sh passes both programs the same ones.

The model: nvcnn's lenet (models/lenet.c): 3x28x28 input (the gray image in 3 channels, x / 127.5
- 1), conv 5x5x32 SAME + relu, 2x2 max pool, conv 5x5x64 SAME + relu, 2x2 max pool, fc 512 + relu,
fc 10; mean softmax cross-entropy. Initialisation (--init): `glorot` is nvcnn's (Glorot-uniform
weights with TensorFlow's fans, zero biases), `torch` is PyTorch's default for Conv2d/Linear.

The optimizer is nvcnn's: SGD with momentum 0.9 (Nesterov unless --nonesterov), weight decay
added to the gradient of every parameter (torch.optim.SGD's weight_decay: the same as nvcnn's L2
term in the loss), the learning rate polynomially decayed per step to 0 at the end of the run
(--lr_poly_power), or step-wise (--lr_decay_policy=step); optional linear warmup
(--warmup_epochs), all as src/optim.c's lr_at.

Augmentation (--crop): `nvcnn` samples the crop exactly as src/io/augment.c (TensorFlow's
sample_distorted_bounding_box: aspect uniform in [0.8, 1.25], the height uniform between the
heights of the smallest and largest area, at most 100 attempts, else the whole image, the
crop's position uniform in [0, W - w]; `tf` is the same with TensorFlow's position range
[0, W - w - 1]), resizes it bilinearly with TensorFlow's legacy mapping
(src = dst * in / out) and rounds to bytes; `torch` is torchvision's RandomResizedCrop (area
uniform in [min, 1], log-uniform aspect, 10 attempts, half-pixel bilinear). Then a random
left-right flip. Evaluation (--eval_crop): nvcnn's central crop of that fraction of the side
(0.875, TensorFlow's central_crop) resized back to 28 the same way, or 1: the whole image.

Data order (--order): a new random permutation of the 60,000 images every epoch, or nvcnn's
loader emulated (8 groups of 7,500 images, as the shards of `make data`, in a random order
through a shuffle buffer of --shuffle_buffer records). Either way the epochs form one stream cut into batches of
--batch_size that run across epoch boundaries, as nvcnn's loader does, and a run lasts
int(--num_epochs * 60000 / --batch_size) steps, as nvcnn's --num_epochs.

Output: a line per evaluation and at the end one line
  peer: epochs=E top1=X reached=R wall_s=W
where wall_s counts from the start of the script (imports, data loading and evaluations
included) to the end of training, or to the evaluation that reached --target_top1.
"""
import argparse
import math
import os
import sys
import time

T0 = time.time()

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

IDX_DIR = "/usr/share/datasets/fashion-mnist"


def parse_args():
    p = argparse.ArgumentParser(description="PyTorch peer of scripts/fashion_mnist.sh")
    p.add_argument("--idx_dir", default=IDX_DIR, help="Fashion-MNIST's IDX files (.gz)")
    p.add_argument("--num_epochs", dest="epochs", type=float, default=5)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--batch_size", type=int, default=64)
    p.add_argument("--learning_rate", type=float, default=0.05)
    p.add_argument("--momentum", type=float, default=0.9)
    p.add_argument("--nonesterov", action="store_true")
    p.add_argument("--weight_decay", type=float, default=1e-4)
    p.add_argument("--lr_poly_power", dest="poly_power", type=float, default=1.0)
    p.add_argument("--lr_decay_policy", choices=("poly", "step"), default="poly")
    p.add_argument("--lr_decay_epochs", type=float, default=30, help="step policy: epochs between decays")
    p.add_argument("--lr_decay_rate", type=float, default=0.1, help="step policy: factor per decay")
    p.add_argument("--warmup_epochs", type=float, default=0)
    p.add_argument("--crop_area_min", type=float, default=0.75)
    p.add_argument("--crop", choices=("nvcnn", "tf", "torch", "none"), default="nvcnn",
                   help="nvcnn: nvcnn's sampler; tf: the same with TensorFlow's offset range [0, W-w-1]; "
                        "torch: torchvision's RandomResizedCrop; none: the whole image")
    p.add_argument("--noflip", action="store_true")
    p.add_argument("--eval_crop", type=float, default=0.875, help="central crop fraction (1: whole image)")
    p.add_argument("--init", choices=("glorot", "torch"), default="glorot")
    p.add_argument("--eval_every_epochs", dest="eval_every", type=float, default=1,
                   help="epochs between evaluations (0: at the end only)")
    p.add_argument("--target_top1", type=float, default=0, help="stop at the first evaluation reaching it (%%)")
    p.add_argument("--channels_last", action="store_true")
    p.add_argument("--bf16", action="store_true",
                   help='train and evaluate under torch.autocast("cpu", dtype=torch.bfloat16) (fp32 weights and optimizer)')
    p.add_argument("--order", choices=("permutation", "buffer"), default="permutation",
                   help="permutation: a new random permutation every epoch; buffer: nvcnn's loader (the 8 shards of "
                        "`make data` in a random order through a shuffle buffer of --shuffle_buffer records)")
    p.add_argument("--shuffle_buffer", type=int, default=10000)
    return p.parse_args()


# ---- data --------------------------------------------------------------------------------------

from idx_files import read_idx  # noqa: E402  (scripts/idx_files.py)


# ---- crops (vectorised over a whole epoch) -----------------------------------------------------

def nvcnn_crops(n, W, H, min_rel, rng, offset_inclusive=True):
    """src/io/augment.c's sample_distorted_crop for images without boxes (the whole image is the
    box; min_object_covered 0.1 always holds for areas >= 0.1), n at once: (x, y, w, h) arrays."""
    x = np.zeros(n, np.int64)
    y = np.zeros(n, np.int64)
    w = np.full(n, W, np.int64)
    h = np.full(n, H, np.int64)
    todo = np.arange(n)
    min_area = np.float32(min_rel) * np.float32(W) * np.float32(H)
    max_area = np.float32(W) * np.float32(H)
    for _ in range(100):
        if todo.size == 0:
            break
        m = todo.size
        aspect = (np.float32(0.8) + np.float32(0.45) * rng.random(m)).astype(np.float32)
        height = np.rint(np.sqrt(min_area / aspect)).astype(np.int64)
        max_h = np.rint(np.sqrt(max_area / aspect)).astype(np.int64)
        over = np.rint(max_h * aspect) > W
        alt = ((np.float32(W) + np.float32(0.5) - np.float32(1e-7)) / aspect).astype(np.int64)
        alt = np.where(np.rint(alt * aspect) > W, alt - 1, alt)
        max_h = np.where(over, alt, max_h)
        max_h = np.minimum(max_h, H)
        height = np.minimum(height, max_h)
        span = max_h - height + 1
        height = height + np.where(height < max_h, (rng.random(m) * span).astype(np.int64), 0)
        width = np.rint(height * aspect).astype(np.int64)
        area = (width * height).astype(np.float32)
        lo = area < min_area
        height = np.where(lo, height + 1, height)
        width = np.where(lo, np.rint(height * aspect).astype(np.int64), width)
        area = (width * height).astype(np.float32)
        hi = area > max_area
        height = np.where(hi, height - 1, height)
        width = np.where(hi, np.rint(height * aspect).astype(np.int64), width)
        area = (width * height).astype(np.float32)
        ok = (area >= min_area) & (area <= max_area) & (width <= W) & (height <= H) & (width > 0) & (height > 0)
        extra = 1 if offset_inclusive else 0
        oy = np.where(height < H, (rng.random(m) * (H - height + extra)).astype(np.int64), 0)
        ox = np.where(width < W, (rng.random(m) * (W - width + extra)).astype(np.int64), 0)
        idx = todo[ok]
        x[idx], y[idx], w[idx], h[idx] = ox[ok], oy[ok], width[ok], height[ok]
        todo = todo[~ok]
    return x, y, w, h


def torch_crops(n, W, H, min_rel, rng):
    """torchvision's RandomResizedCrop.get_params (scale (min_rel, 1), ratio (0.8, 1.25)), n at once."""
    x = np.zeros(n, np.int64)
    y = np.zeros(n, np.int64)
    w = np.full(n, W, np.int64)
    h = np.full(n, H, np.int64)
    todo = np.arange(n)
    area = W * H
    lr = (math.log(0.8), math.log(1.25))
    for _ in range(10):
        if todo.size == 0:
            break
        m = todo.size
        ta = area * (min_rel + (1 - min_rel) * rng.random(m))
        ar = np.exp(lr[0] + (lr[1] - lr[0]) * rng.random(m))
        cw = np.rint(np.sqrt(ta * ar)).astype(np.int64)
        ch = np.rint(np.sqrt(ta / ar)).astype(np.int64)
        ok = (cw > 0) & (cw <= W) & (ch > 0) & (ch <= H)
        oy = (rng.random(m) * (H - ch + 1)).astype(np.int64)
        ox = (rng.random(m) * (W - cw + 1)).astype(np.int64)
        idx = todo[ok]
        x[idx], y[idx], w[idx], h[idx] = ox[ok], oy[ok], cw[ok], ch[ok]
        todo = todo[~ok]
    return x, y, w, h  # the fallback (ratio within range): the whole image


def buffer_order(n, groups, S, rng):
    """src/io/loader.c's epoch_order: the groups (contiguous shards) in a random order, then a
    shuffle buffer of S slots (emit a random slot, refill it with the next record)."""
    bounds = [n * g // groups for g in range(groups + 1)]
    seq = np.concatenate([np.arange(bounds[g], bounds[g + 1]) for g in rng.permutation(groups)])
    cap = min(S, n)
    buf = list(seq[:cap])
    nxt = cap
    out = np.empty(n, np.int64)
    picks = rng.random(n)
    for o in range(n):
        j = int(picks[o] * len(buf))
        out[o] = buf[j]
        if nxt < n:
            buf[j] = seq[nxt]
            nxt += 1
        else:
            buf[j] = buf[-1]
            buf.pop()
    return out


def crop_resize(img, x, y, w, h, out, legacy):
    """Bilinear crop-and-resize of img [N, 1, H, W] (float) to [N, 1, out, out], rounded to
    integers as nvcnn's bytes. legacy: TensorFlow's src = dst * in / out, clamped to the crop's
    last pixel (src/io/augment.c); else half-pixel centres (torch / torchvision)."""
    N, _, H, W = img.shape
    j = torch.arange(out, dtype=torch.float64)

    def coords(o, size, full):
        o = o.double()[:, None]
        size = size.double()[:, None]
        if legacy:
            s = j[None, :] * size / out
        else:
            s = (j[None, :] + 0.5) * size / out - 0.5
        s = torch.minimum(torch.clamp(s, min=0.0), size - 1)
        return (2 * (o + s) / (full - 1) - 1).float()

    gx = coords(x, w, W)
    gy = coords(y, h, H)
    grid = torch.stack((gx[:, None, :].expand(N, out, out), gy[:, :, None].expand(N, out, out)), dim=-1)
    r = F.grid_sample(img, grid, mode="bilinear", padding_mode="border", align_corners=True)
    return torch.round(r)


def central_box(W, H, frac):
    y0 = int((H - H * frac) / 2)
    x0 = int((W - W * frac) / 2)
    return x0, y0, W - 2 * x0, H - 2 * y0


# ---- model -------------------------------------------------------------------------------------

def lenet(num_classes=10):
    return nn.Sequential(
        nn.Conv2d(3, 32, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(64 * 7 * 7, 512), nn.ReLU(), nn.Linear(512, num_classes))


def glorot_(model):
    for m in model.modules():
        if isinstance(m, (nn.Conv2d, nn.Linear)):
            nn.init.xavier_uniform_(m.weight)  # fans: cin*kh*kw and cout*kh*kw, as TensorFlow's
            nn.init.zeros_(m.bias)


def to_input(u8, channels_last):
    x = (u8 * (1.0 / 127.5) - 1.0).expand(-1, 3, -1, -1)
    return x.contiguous(memory_format=torch.channels_last) if channels_last else x.contiguous()


def main():
    a = parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    rng = np.random.default_rng(a.seed)

    xtr = torch.from_numpy(read_idx(os.path.join(a.idx_dir, "train-images-idx3-ubyte.gz")).copy()).float()[:, None]
    ytr = torch.from_numpy(read_idx(os.path.join(a.idx_dir, "train-labels-idx1-ubyte.gz")).astype(np.int64))
    xte = torch.from_numpy(read_idx(os.path.join(a.idx_dir, "t10k-images-idx3-ubyte.gz")).copy()).float()[:, None]
    yte = torch.from_numpy(read_idx(os.path.join(a.idx_dir, "t10k-labels-idx1-ubyte.gz")).astype(np.int64))
    N, _, H, W = xtr.shape
    S = H  # the network's input size: 28
    if a.eval_crop < 1:
        bx, by, bw, bh = central_box(W, H, a.eval_crop)
        n = xte.shape[0]
        full = lambda v: torch.full((n,), v, dtype=torch.int64)  # noqa: E731
        xte = crop_resize(xte, full(bx), full(by), full(bw), full(bh), S, legacy=True)

    model = lenet()
    if a.init == "glorot":
        glorot_(model)
    if a.channels_last:
        model = model.to(memory_format=torch.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=a.learning_rate, momentum=a.momentum,
                          nesterov=not a.nonesterov, weight_decay=a.weight_decay)
    B = a.batch_size
    steps_per_epoch = N / B
    total = int(a.epochs * N / B)  # nvcnn's step count: --num_epochs * records / batch, rounded down
    warm = int(round(a.warmup_epochs * int(steps_per_epoch)))

    def lr_at(step):
        if warm > 0 and step < warm:
            return a.learning_rate * (step + 1) / warm
        if a.lr_decay_policy == "step":
            return a.learning_rate * a.lr_decay_rate ** math.floor(step / int(steps_per_epoch) / a.lr_decay_epochs + 1e-9)
        t = min(max((step - warm) / max(total - warm, 1), 0.0), 1.0)
        return a.learning_rate * (1 - t) ** a.poly_power

    def evaluate():
        model.eval()
        correct = 0
        with torch.no_grad():
            for i in range(0, xte.shape[0], 500):
                with torch.autocast("cpu", dtype=torch.bfloat16, enabled=a.bf16):
                    out = model(to_input(xte[i:i + 500], a.channels_last))
                correct += (out.argmax(1) == yte[i:i + 500]).sum().item()
        model.train()
        return 100.0 * correct / xte.shape[0]

    print("peer: lenet, %d training / %d test images, batch %d, %d steps, %s" %
          (N, xte.shape[0], B, total, " ".join("%s=%s" % kv for kv in sorted(vars(a).items()))), flush=True)
    # the samples as one stream, epoch after epoch (each a new permutation with its own crops and
    # flips), cut into batches of B that run across epoch boundaries, as nvcnn's loader does
    def epoch_stream():
        while True:
            perm = rng.permutation(N) if a.order == "permutation" else buffer_order(N, 8, a.shuffle_buffer, rng)
            if a.crop in ("nvcnn", "tf"):
                c = nvcnn_crops(N, W, H, a.crop_area_min, rng, offset_inclusive=a.crop == "nvcnn")
            elif a.crop == "torch":
                c = torch_crops(N, W, H, a.crop_area_min, rng)
            else:
                c = (np.zeros(N, np.int64), np.zeros(N, np.int64), np.full(N, W, np.int64), np.full(N, H, np.int64))
            flips = rng.random(N) < 0.5 if not a.noflip else np.zeros(N, dtype=bool)
            yield perm, c, flips

    stream = epoch_stream()
    pending = None  # (indices, crops, flips) not yet batched

    def next_batch():
        nonlocal pending
        parts = []
        need = B
        while need > 0:
            if pending is None or pending[0].size == 0:
                perm, c, flips = next(stream)
                pending = (perm, tuple(v[perm] for v in c), flips[perm])
            take = min(need, pending[0].size)
            parts.append(tuple(v[:take] for v in (pending[0],) + pending[1] + (pending[2],)))
            pending = (pending[0][take:], tuple(v[take:] for v in pending[1]), pending[2][take:])
            need -= take
        return [np.concatenate([p[k] for p in parts]) for k in range(6)]

    step = 0
    top1 = float("nan")
    reached = False
    next_eval = a.eval_every if a.eval_every > 0 else float("inf")
    while step < total and not reached:
        idx, cx, cy, cw, ch, flip = next_batch()
        img = xtr[torch.from_numpy(idx)]
        if a.crop != "none":
            img = crop_resize(img, torch.from_numpy(cx), torch.from_numpy(cy), torch.from_numpy(cw), torch.from_numpy(ch), S,
                              legacy=a.crop != "torch")
        f = torch.from_numpy(flip)
        if f.any():
            img[f] = img[f].flip(-1)
        for g in opt.param_groups:
            g["lr"] = lr_at(step)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=a.bf16):
            logits = model(to_input(img, a.channels_last))
        loss = F.cross_entropy(logits.float(), ytr[torch.from_numpy(idx)])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        step += 1
        done = step * B / N  # epochs done
        if done >= next_eval - 1e-9 or step == total:
            t = time.time()
            top1 = evaluate()
            print("Validation at step %d (epoch %.2f): top-1 %.3f %% (%.1f s; %.1f s since start; loss %.3f)" %
                  (step, done, top1, time.time() - t, time.time() - T0, loss.item()), flush=True)
            while next_eval <= done + 1e-9:
                next_eval += a.eval_every if a.eval_every > 0 else float("inf")
            if a.target_top1 > 0 and top1 >= a.target_top1:
                reached = True
    print("peer: epochs=%.2f top1=%.3f reached=%d wall_s=%.1f" % (step * B / N, top1, int(reached), time.time() - T0),
          flush=True)


if __name__ == "__main__":
    main()
