#!/usr/bin/env python3
"""The validation top-1 of an exported Fashion-MNIST model under ONNX Runtime, on the images that
nvcnn --eval sees: Fashion-MNIST's test set (the IDX files that `make data` converts into
validation-*), each 28x28 gray image made RGB, cut to nvcnn's central crop (87.5 %: 26x26 at 1,1
for 28x28) and resized to the model's input size with nvcnn's bilinear resize (src/io/augment.c:
TensorFlow's legacy mapping, weights in 1/2048 in fixed point, rounded once), then x / 127.5 - 1
in float32, NCHW. Prints the top-1 (%) and the number of images.
Usage: onnx_fashion_mnist.py MODEL.onnx t10k-images-idx3-ubyte.gz t10k-labels-idx1-ubyte.gz
"""
import math
import sys

import numpy as np
import onnxruntime as ort

from idx_files import read_idx  # scripts/idx_files.py

ONE, SHIFT = 2048, 22


def central_crop(w, h):
    y0, x0 = int((h - h * 0.875) / 2), int((w - w * 0.875) / 2)
    return x0, y0, w - 2 * x0, h - 2 * y0


def lround(v):  # C's lround for the non-negative values here
    return int(math.floor(v + 0.5))


def resize_bilinear(src, dw, dh):
    """nvcnn's resize_bilinear_rgb on [n][sh][sw] bytes (all channels equal), in its arithmetic."""
    n, sh, sw = src.shape
    xs, ys = sw / dw, sh / dh
    xo, xw = [], []
    for x in range(dw):
        fx = x * xs
        x0 = min(int(fx), sw - 1)
        xo.append(x0)
        xw.append(lround((fx - x0) * ONE) if x0 + 1 <= sw - 1 else 0)
    out = np.empty((n, dh, dw), dtype=np.uint8)
    s = src.astype(np.uint64)
    for y in range(dh):
        fy = y * ys
        y0 = min(int(fy), sh - 1)
        y1 = y0 + 1 if y0 + 1 < sh else y0
        wy = lround((fy - y0) * ONE) if y1 != y0 else 0
        v = s[:, y0, :] * (ONE - wy) + s[:, y1, :] * wy  # [n][sw]
        for x in range(dw):
            w1 = xw[x]
            p0 = v[:, xo[x]]
            p1 = v[:, xo[x] + 1] if w1 else p0
            out[:, y, x] = ((p0 * (ONE - w1) + p1 * w1 + (1 << (SHIFT - 1))) >> SHIFT).astype(np.uint8)
    return out


def main():
    if len(sys.argv) != 4:
        print(__doc__)
        return 2
    sess = ort.InferenceSession(sys.argv[1], providers=["CPUExecutionProvider"])
    shape = sess.get_inputs()[0].shape
    size = int(shape[2])
    images, labels = read_idx(sys.argv[2]), read_idx(sys.argv[3])
    x0, y0, cw, ch = central_crop(images.shape[2], images.shape[1])
    crop = resize_bilinear(images[:, y0:y0 + ch, x0:x0 + cw], size, size)
    x = crop.astype(np.float32) * (np.float32(1.0) / np.float32(127.5)) - np.float32(1.0)
    x = np.repeat(x[:, None, :, :], 3, axis=1)  # gray as RGB, NCHW
    correct = 0
    for i in range(0, len(x), 500):
        logits = sess.run(["logits"], {"images": x[i:i + 500]})[0]
        correct += int((logits.argmax(axis=1) == labels[i:i + 500]).sum())
    print("ONNX Runtime top-1: %.3f %% (%d of %d images)" % (100.0 * correct / len(x), correct, len(x)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
