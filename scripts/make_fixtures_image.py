#!/usr/bin/env python3
"""Writes small image fixtures for tests/test_image.c into data/fixtures/ (run once; the files
are committed, so `make test` needs no Python).

For each JPEG, the reference decode comes from TensorFlow's decode_jpeg with nvcnn's settings
(dct_method='INTEGER_FAST', fancy_upscaling=False, channels=3): an implementation independent of
nvcnn's. CMYK JPEGs (which TensorFlow does not decode) and PNGs use Pillow's decode.
Each reference is written as a binary PPM (P6).
Needs: pip install tensorflow-cpu pillow numpy
"""
import io
import os

import numpy as np
from PIL import Image

out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "fixtures")
os.makedirs(out, exist_ok=True)
rng = np.random.default_rng(1234)


def scene(w, h):
    """Smooth gradients, a few hard-edged shapes and mild noise: natural-ish content."""
    y, x = np.mgrid[0:h, 0:w].astype(np.float32)
    r = 128 + 100 * np.sin(x / 9.0) * np.cos(y / 13.0)
    g = 255 * x / max(w - 1, 1)
    b = 255 * y / max(h - 1, 1)
    img = np.stack([r, g, b], -1)
    img[(x - w / 3) ** 2 + (y - h / 2) ** 2 < (min(w, h) / 5) ** 2] = [250, 30, 40]
    img[int(h * 0.6):int(h * 0.8), int(w * 0.55):int(w * 0.9)] = [20, 200, 90]
    img += rng.normal(0, 6, img.shape)
    return np.clip(img, 0, 255).astype(np.uint8)


def ppm(path, rgb):
    h, w, _ = rgb.shape
    with open(path, "wb") as f:
        f.write(b"P6\n%d %d\n255\n" % (w, h))
        f.write(rgb.tobytes())


def save(name, data):
    with open(os.path.join(out, name), "wb") as f:
        f.write(data)


def jpeg_bytes(img, **kw):
    b = io.BytesIO()
    img.save(b, format="JPEG", **kw)
    return b.getvalue()


import tensorflow as tf  # noqa: E402


def tf_ref(data):
    t = tf.io.decode_jpeg(data, channels=3, dct_method="INTEGER_FAST", fancy_upscaling=False)
    return t.numpy()


def write_all():
    cases = {
        "img_420.jpg": jpeg_bytes(Image.fromarray(scene(61, 47)), quality=90, subsampling=2),
        "img_444.jpg": jpeg_bytes(Image.fromarray(scene(40, 33)), quality=90, subsampling=0),
        "img_422_odd.jpg": jpeg_bytes(Image.fromarray(scene(35, 29)), quality=85, subsampling=1),
        "img_progressive.jpg": jpeg_bytes(Image.fromarray(scene(64, 48)), quality=90, progressive=True),
        "img_gray.jpg": jpeg_bytes(Image.fromarray(scene(50, 37)).convert("L"), quality=90),
    }
    # An ImageNet-sized JPEG for region/scaled-decode checks (compared with nvcnn's own full decode).
    save("img_large.jpg", jpeg_bytes(Image.fromarray(scene(500, 375)), quality=90))
    for name, data in cases.items():
        save(name, data)
        ppm(os.path.join(out, name + ".ppm"), tf_ref(data))

    # CMYK (Pillow writes Adobe-inverted CMYK JPEGs); reference: Pillow's own decode to RGB.
    cmyk = jpeg_bytes(Image.fromarray(scene(32, 24)).convert("CMYK"), quality=95)
    save("img_cmyk.jpg", cmyk)
    ppm(os.path.join(out, "img_cmyk.jpg.ppm"), np.asarray(Image.open(io.BytesIO(cmyk)).convert("RGB")))

    # PNGs: RGB, RGBA, paletted, gray, 16-bit gray (values v * 257). References as TensorFlow's
    # decode_png(channels=3): alpha dropped, 16-bit samples to their high byte.
    base = scene(23, 17)
    pngs = {
        "img_rgb.png": Image.fromarray(base),
        "img_rgba.png": Image.fromarray(np.dstack([base, (np.arange(23 * 17) % 256).reshape(17, 23).astype(np.uint8)]), "RGBA"),
        "img_palette.png": Image.fromarray(base).convert("P", palette=Image.ADAPTIVE, colors=16),
        "img_gray.png": Image.fromarray(base).convert("L"),
        "img_gray16.png": Image.fromarray(np.asarray(Image.fromarray(base).convert("L")).astype(np.uint16) * 257),
    }
    for name, im in pngs.items():
        b = io.BytesIO()
        im.save(b, format="PNG")
        save(name, b.getvalue())
        if im.mode == "RGBA":
            rgb = np.asarray(im)[..., :3]
        elif im.mode == "I;16":
            rgb = np.repeat((np.asarray(im).astype(np.uint32) >> 8).astype(np.uint8)[..., None], 3, -1)
        else:
            rgb = np.asarray(im.convert("RGB"))
        ppm(os.path.join(out, name + ".ppm"), rgb)


def png16_fixtures():
    """16-bit PNGs with samples of any value (not v * 257, where rounding and truncation agree),
    written and decoded by TensorFlow: decode_png(channels=3) keeps each sample's high byte."""
    r16 = np.random.default_rng(16)
    rgb16 = r16.integers(0, 65536, size=(11, 13, 3), dtype=np.uint16)
    gray16 = r16.integers(0, 65536, size=(9, 7, 1), dtype=np.uint16)
    for name, a in (("img_rgb16.png", rgb16), ("img_gray16_odd.png", gray16)):
        data = tf.io.encode_png(a).numpy()
        save(name, data)
        ppm(os.path.join(out, name + ".ppm"), tf.io.decode_png(data, channels=3).numpy())


if __name__ == "__main__":
    import sys

    # `make_fixtures_image.py png16`: only the 16-bit PNGs (the other fixtures left as they are)
    if sys.argv[1:] != ["png16"]:
        write_all()
    png16_fixtures()
    print("wrote fixtures to", os.path.normpath(out))
