#!/usr/bin/env python3
"""One training step of nvcnn's lenet against PyTorch on the same batch (needs torch and numpy;
not run by `make test`).

Runs ./nvcnn for one step on the first --batch_size records of data/fashion-mnist (no shuffling,
--crop_area_min=1: the whole image, so that the only randomness is each image's flip) with a
checkpoint, and reads back the parameters after the step and the momentum buffer. After the
first step of Nesterov SGD the buffer holds the step's gradient g (weight decay included) and the
parameters are w0 - lr * (1 + momentum) * g, which gives back the initial parameters w0. PyTorch
then computes the gradient of the same network from w0 on the same images (read from the shards,
flipped where nvcnn's per-image generator says so: src/util.c's xoshiro256** seeded as
src/io/loader.c does) and the two are compared tensor by tensor.

  scripts/step_vs_torch.py [--seed=7] [--cpu_impl=onednn|reference]

Prints the relative difference per tensor; exits 1 if one exceeds --tol (1e-4).
"""
import argparse
import os
import struct
import subprocess
import sys
import tempfile
import zlib

import numpy as np
import torch
import torch.nn.functional as F

sys.dont_write_bytecode = True  # no __pycache__ in scripts/
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fashion_mnist_torch import lenet, to_input  # noqa: E402

M64 = (1 << 64) - 1


# ---- nvcnn's generator (src/util.c) and the loader's per-sample seeds (src/io/loader.c) ----------

def splitmix64(x):
    x = (x + 0x9E3779B97F4A7C15) & M64
    z = x
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
    return x, z ^ (z >> 31)


class Rng:
    def __init__(self, seed):
        self.s = []
        x = seed
        for _ in range(4):
            x, z = splitmix64(x)
            self.s.append(z)

    @staticmethod
    def stream(seed, stream):
        _, mixed = splitmix64(seed ^ ((0xD1B54A32D192ED03 * (stream + 1)) & M64))
        return Rng(mixed)

    def u64(self):
        def rotl(v, k):
            return ((v << k) | (v >> (64 - k))) & M64
        s0, s1, s2, s3 = self.s
        r = (rotl((s1 * 5) & M64, 7) * 9) & M64
        t = (s1 << 17) & M64
        s2 ^= s0
        s3 ^= s1
        s1 ^= s2
        s0 ^= s3
        s2 ^= t
        s3 = rotl(s3, 45)
        self.s = [s0, s1, s2, s3]
        return r

    def uniform(self):
        return (self.u64() >> 11) * (1.0 / 9007199254740992.0)


def mix3(a, b, c):
    x = ((a * 0x9E3779B97F4A7C15) & M64) ^ (((b + 0x632BE59BD9B4E019) & M64) * 0xBF58476D1CE4E5B9 & M64) ^ \
        (((c + 0x2545F4914F6CDD1D) & M64) * 0x94D049BB133111EB & M64)
    x ^= x >> 31
    x = (x * 0xD6E8FEB86659FD93) & M64
    return x ^ (x >> 32)


def flipped(seed, k, W=28, H=28):
    """Sample k's flip with --crop_area_min=1 (src/io/augment.c): every crop attempt draws one
    aspect ratio and succeeds only where it rounds to the whole image; the flip is the next draw."""
    f32 = np.float32
    r = Rng.stream(seed, mix3(2, 0, k))
    area = f32(W) * f32(H)
    for _ in range(100):
        aspect = f32(f32(0.8) + (f32(1.25) - f32(0.8)) * f32(r.uniform()))
        h = int(np.rint(np.sqrt(f32(area / aspect))))
        if np.rint(f32(h) * aspect) > W:
            h = int((f32(W) + f32(0.5) - f32(1e-7)) / aspect)
            if np.rint(f32(h) * aspect) > W:
                h -= 1
        h = min(h, H)
        w = int(np.rint(f32(h) * aspect))
        a = f32(w) * f32(h)
        if a < area:
            h += 1
            w = int(np.rint(f32(h) * aspect))
            a = f32(w) * f32(h)
        if a > area:
            h -= 1
            w = int(np.rint(f32(h) * aspect))
            a = f32(w) * f32(h)
        if a == area and w <= W and h <= H:
            break
    return r.uniform() < 0.5


# ---- the shards: TFRecord framing, tf.train.Example, 8-bit gray PNG ----------------------------

def records(path):
    b = open(path, "rb").read()
    o = 0
    while o < len(b):
        n = struct.unpack("<Q", b[o:o + 8])[0]
        yield b[o + 12:o + 12 + n]
        o += 16 + n


def pb_fields(buf):
    """(field number, wire type, value) of a protobuf message: varints as ints, the rest as bytes."""
    o = 0
    while o < len(buf):
        key, o = varint(buf, o)
        f, wt = key >> 3, key & 7
        if wt == 0:
            v, o = varint(buf, o)
        elif wt == 2:
            n, o = varint(buf, o)
            v, o = buf[o:o + n], o + n
        elif wt == 1:
            v, o = buf[o:o + 8], o + 8
        elif wt == 5:
            v, o = buf[o:o + 4], o + 4
        else:
            raise ValueError("wire type %d" % wt)
        yield f, wt, v


def varint(b, o):
    v = s = 0
    while True:
        c = b[o]
        o += 1
        v |= (c & 0x7F) << s
        s += 7
        if c < 0x80:
            return v, o


def example(rec):
    """{key: Feature bytes} of a tf.train.Example."""
    feats = {}
    for f, _, features in pb_fields(rec):
        if f != 1:
            continue
        for g, _, entry in pb_fields(features):
            if g != 1:
                continue
            kv = dict((h, v) for h, _, v in pb_fields(entry))
            feats[kv[1].decode()] = kv[2]
    return feats


def png_gray(data):
    o = 8
    idat = b""
    while True:
        n = struct.unpack(">I", data[o:o + 4])[0]
        t, d = data[o + 4:o + 8], data[o + 8:o + 8 + n]
        o += 12 + n
        if t == b"IHDR":
            W, H, depth, color, _, _, interlace = struct.unpack(">IIBBBBB", d)
            if depth != 8 or color != 0 or interlace:
                raise ValueError("not an 8-bit gray non-interlaced PNG")
        elif t == b"IDAT":
            idat += d
        elif t == b"IEND":
            break
    raw = zlib.decompress(idat)
    out = np.zeros((H, W), np.int32)
    prev = np.zeros(W, np.int32)
    for y in range(H):
        f = raw[y * (W + 1)]
        row = np.frombuffer(raw, np.uint8, W, y * (W + 1) + 1).astype(np.int32)
        cur = np.zeros(W, np.int32)
        for x in range(W):
            a = cur[x - 1] if x else 0
            c = prev[x - 1] if x else 0
            b = prev[x]
            p = (0, a, b, (a + b) // 2)[f] if f < 4 else \
                (a if abs(b - c) <= abs(a - c) and abs(b - c) <= abs(a + b - 2 * c) else
                 (b if abs(a - c) <= abs(a + b - 2 * c) else c))
            cur[x] = (row[x] + p) & 255
        out[y] = cur
        prev = cur
    return out.astype(np.float32)


def int64_feature(feat):
    for f, _, lst in pb_fields(feat):
        if f == 3:
            for g, wt, v in pb_fields(lst):
                if g == 1:
                    return v if wt == 0 else varint(v, 0)[0]
    raise ValueError("no int64 value")


def bytes_feature(feat):
    for f, _, lst in pb_fields(feat):
        if f == 1:
            for g, _, v in pb_fields(lst):
                if g == 1:
                    return v
    raise ValueError("no bytes value")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--batch_size", type=int, default=64)
    p.add_argument("--learning_rate", type=float, default=0.05)
    p.add_argument("--momentum", type=float, default=0.9)
    p.add_argument("--weight_decay", type=float, default=1e-4)
    p.add_argument("--cpu_impl", default="onednn")
    p.add_argument("--data_dir", default="data/fashion-mnist")
    p.add_argument("--tol", type=float, default=1e-4)
    a = p.parse_args()
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    B = a.batch_size
    with tempfile.TemporaryDirectory() as log:
        env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
        subprocess.run([os.path.join(root, "nvcnn"), "--model=lenet", "--data_dir=" + a.data_dir, "--num_classes=10",
                        "--batch_size=%d" % B, "--learning_rate=%g" % a.learning_rate, "--momentum=%g" % a.momentum,
                        "--weight_decay=%g" % a.weight_decay, "--crop_area_min=1", "--shuffle_buffer=0", "--num_batches=1",
                        "--nstep_burnin=0", "--seed=%d" % a.seed, "--cpu_impl=" + a.cpu_impl, "--log_dir=" + log],
                       cwd=root, env=env, check=True, stdout=subprocess.DEVNULL)
        ck = open(os.path.join(log, "ckpt-1.nvcnn"), "rb").read()
    hlen = struct.unpack("<I", ck[12:16])[0]
    model = lenet()
    params = list(model.parameters())
    P = sum(q.numel() for q in params)
    off = 16 + hlen
    w1 = np.frombuffer(ck, np.float32, P, off).astype(np.float64)
    g_nv = np.frombuffer(ck, np.float32, P, off + 4 * P)  # after the parameters (lenet has no state tensors)
    w0 = w1 + a.learning_rate * (1 + a.momentum) * g_nv.astype(np.float64)

    # nvcnn flattens its 64x7x7 features as (h, w, c); PyTorch as (c, h, w)
    def to_torch(v, q):
        if q.shape == (512, 3136):
            v = v.reshape(512, 7, 7, 64).transpose(0, 3, 1, 2)
        return torch.from_numpy(np.array(v.reshape(q.shape), dtype=np.float32))

    o = 0
    for q in params:
        q.data.copy_(to_torch(w0[o:o + q.numel()], q))
        o += q.numel()

    shard = sorted(f for f in os.listdir(os.path.join(root, a.data_dir)) if f.startswith("train-"))[0]
    imgs, labels = [], []
    for k, rec in enumerate(records(os.path.join(root, a.data_dir, shard))):
        if k == B:
            break
        ex = example(rec)
        img = png_gray(bytes_feature(ex["image/encoded"]))
        imgs.append(img[:, ::-1] if flipped(a.seed, k) else img)
        labels.append(int64_feature(ex["image/class/label"]) - 1)
    x = torch.from_numpy(np.ascontiguousarray(np.stack(imgs)[:, None]))
    loss = F.cross_entropy(model(to_input(x, False)), torch.tensor(labels))
    loss.backward()
    names = ("conv0/weights", "conv0/biases", "conv1/weights", "conv1/biases", "fc0/weights", "fc0/biases",
             "fc1/weights", "fc1/biases")
    worst = 0
    o = 0
    print("one step of lenet, batch %d, seed %d, --cpu_impl=%s: nvcnn's gradient against PyTorch's" % (B, a.seed, a.cpu_impl))
    for name, q in zip(names, params):
        g_pt = (q.grad + a.weight_decay * q.data).double()
        g = to_torch(g_nv[o:o + q.numel()], q).double()
        o += q.numel()
        rel = ((g - g_pt).norm() / g_pt.norm()).item()
        worst = max(worst, rel)
        print("  %-14s |g| %.4e  relative difference %.2e" % (name, g_pt.norm().item(), rel))
    print("worst %.2e (tolerance %.0e): %s" % (worst, a.tol, "same step" if worst <= a.tol else "DIFFERENT"))
    return 0 if worst <= a.tol else 1


if __name__ == "__main__":
    sys.exit(main())
