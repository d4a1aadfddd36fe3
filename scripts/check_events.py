#!/usr/bin/env python3
"""Reads nvcnn's TensorBoard event files with TensorFlow's own reader and prints the scalars:
a check that they are valid for TensorBoard. Usage: scripts/check_events.py LOG_DIR
Needs: pip install tensorflow-cpu (not needed by make test)."""
import glob
import sys

import tensorflow as tf

for path in sorted(glob.glob(sys.argv[1] + "/events.out.tfevents.*")):
    n = 0
    for e in tf.compat.v1.train.summary_iterator(path):
        if e.HasField("file_version"):
            print(path, "version", e.file_version)
        for v in e.summary.value:
            print(" ", e.step, v.tag, v.simple_value)
            n += 1
    print(path, n, "scalars")
