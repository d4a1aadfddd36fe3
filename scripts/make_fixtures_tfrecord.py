#!/usr/bin/env python3
"""Writes data/fixtures/tf-examples.tfrecord with TensorFlow's own TFRecord writer and
tf.train.Example serializer, and data/fixtures/tf-examples.expected with the values the C tests
compare against (tests/test_tfrecord.c, tests/test_example.c).

Run once in a throwaway environment with TensorFlow installed:
    python3 -m venv /tmp/tfenv && /tmp/tfenv/bin/pip install tensorflow-cpu
    /tmp/tfenv/bin/python scripts/make_fixtures_tfrecord.py
`make test` only reads the committed output.

expected format, one line per record:
    <offset> <payload length> <label> <text> <nbox> [<xmin> <ymin> <xmax> <ymax>]... <png bytes> <crc32 of png>
and one final line "pixels <h> <w> <hex of the RGB pixels of record 0>".
"""
import os
import zlib

import numpy as np
import tensorflow as tf

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "data", "fixtures")


def bytes_feature(v):
    return tf.train.Feature(bytes_list=tf.train.BytesList(value=v))


def int64_feature(v):
    return tf.train.Feature(int64_list=tf.train.Int64List(value=v))


def float_feature(v):
    return tf.train.Feature(float_list=tf.train.FloatList(value=v))


def main():
    os.makedirs(OUT, exist_ok=True)
    rng = np.random.RandomState(7)
    records = [
        # label (1-based), text, boxes (xmin, ymin, xmax, ymax), image height, width
        (1, b"tench", [(0.1, 0.2, 0.6, 0.9), (0.25, 0.0, 1.0, 0.5)], 6, 4),
        (7, b"cock", [], 5, 5),
        (1000, b"toilet tissue, toilet paper, bathroom tissue", [(0.0, 0.0, 1.0, 1.0)], 3, 8),
    ]
    path = os.path.join(OUT, "tf-examples.tfrecord")
    lines = []
    pixels0 = None
    offset = 0
    with tf.io.TFRecordWriter(path) as w:
        for label, text, boxes, h, wd in records:
            img = rng.randint(0, 256, size=(h, wd, 3)).astype(np.uint8)
            if pixels0 is None:
                pixels0 = img
            png = tf.io.encode_png(img).numpy()
            feats = {
                "image/encoded": bytes_feature([png]),
                "image/format": bytes_feature([b"PNG"]),
                "image/height": int64_feature([h]),
                "image/width": int64_feature([wd]),
                "image/class/label": int64_feature([label]),
                "image/class/text": bytes_feature([text]),
                "image/object/bbox/xmin": float_feature([b[0] for b in boxes]),
                "image/object/bbox/ymin": float_feature([b[1] for b in boxes]),
                "image/object/bbox/xmax": float_feature([b[2] for b in boxes]),
                "image/object/bbox/ymax": float_feature([b[3] for b in boxes]),
            }
            ser = tf.train.Example(features=tf.train.Features(feature=feats)).SerializeToString()
            w.write(ser)
            box_txt = " ".join("%.9g %.9g %.9g %.9g" % b for b in boxes)
            lines.append("%d %d %d %s %d %s %d %d" % (offset, len(ser), label, text.decode().replace(" ", "_"),
                                                      len(boxes), box_txt, len(png), zlib.crc32(png)))
            offset += 12 + len(ser) + 4
    # Read it back with TensorFlow's reader as a check of the file itself.
    n = sum(1 for _ in tf.data.TFRecordDataset(path))
    assert n == len(records), n
    h, wd = pixels0.shape[:2]
    lines.append("pixels %d %d %s" % (h, wd, pixels0.tobytes().hex()))
    with open(os.path.join(OUT, "tf-examples.expected"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("wrote", path, os.path.getsize(path), "bytes")


if __name__ == "__main__":
    main()
