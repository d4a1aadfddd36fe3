#!/usr/bin/env python3
"""Checks models written by nvcnn --export_onnx against nvcnn's own forward pass, with ONNX's
checker and ONNX Runtime (the test dependencies of scripts/install-deps.sh, in .deps/venv).

For each NAME given, DIR holds:
  NAME.onnx      the exported model
  NAME.txt       "batch channels height width classes": the shapes of the two files below
  NAME.input     the batch nvcnn ran, float32 NCHW (x / 127.5 - 1 values)
  NAME.expected  nvcnn's forward-only (inference) outputs on it, float32: the logits
                 [batch][classes], then the softmax probabilities [batch][classes]

Each model must pass onnx.checker.check_model(full_check=True), load in ONNX Runtime (CPU), take
an input "images" [N, 3, H, W] with a symbolic batch dimension, and give outputs "logits" and
"softmax" that agree with nvcnn's element by element: every probability within 1e-4 of the larger
of the two values, relatively (probabilities under 1e-9, whose relative error is the logits'
absolute error magnified, compare absolutely), and every logit within 1e-4 relatively of the
largest logit of its sample. One line per model with the largest differences; exit 1 if any fails.
Usage: onnx_check.py DIR NAME...
"""
import os
import sys

import numpy as np
import onnx
import onnxruntime as ort

RTOL = 1e-4
PROB_FLOOR = 1e-9


def check(d, name):
    path = os.path.join(d, name + ".onnx")
    model = onnx.load(path)
    onnx.checker.check_model(model, full_check=True)
    n, c, h, w, k = (int(v) for v in open(os.path.join(d, name + ".txt")).read().split())
    x = np.fromfile(os.path.join(d, name + ".input"), dtype=np.float32).reshape(n, c, h, w)
    want = np.fromfile(os.path.join(d, name + ".expected"), dtype=np.float32).reshape(2, n, k)
    opts = ort.SessionOptions()
    # the cores the caller gives (the test runner sets OMP_NUM_THREADS to a test's share), else 2
    threads = os.environ.get("OMP_NUM_THREADS", "")
    opts.intra_op_num_threads = int(threads) if threads.isdigit() and int(threads) > 0 else 2
    sess = ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])
    ins = sess.get_inputs()
    if len(ins) != 1 or ins[0].name != "images" or ins[0].shape[1:] != [c, h, w] or isinstance(ins[0].shape[0], int):
        return False, "input %s %s, expected images [N, %d, %d, %d]" % (ins[0].name, ins[0].shape, c, h, w)
    logits, prob = sess.run(["logits", "softmax"], {"images": x})
    if logits.shape != (n, k) or prob.shape != (n, k):
        return False, "outputs of shapes %s and %s, expected (%d, %d)" % (logits.shape, prob.shape, n, k)
    wl, wp = want[0].astype(np.float64), want[1].astype(np.float64)
    gl, gp = logits.astype(np.float64), prob.astype(np.float64)
    big = np.maximum(np.abs(gp), np.abs(wp))
    prel = np.where(big >= PROB_FLOOR, np.abs(gp - wp) / np.maximum(big, PROB_FLOOR), 0.0)
    pabs = np.where(big < PROB_FLOOR, np.abs(gp - wp), 0.0)
    scale = np.maximum(np.abs(wl).max(axis=1, keepdims=True), 1e-30)
    lrel = np.abs(gl - wl) / scale
    ok = prel.max() <= RTOL and pabs.max() <= PROB_FLOOR and lrel.max() <= RTOL and np.isfinite(gl).all()
    return ok, "softmax max rel diff %.3g, logits max diff %.3g of the sample's largest |logit| (%.3g); %d nodes, opset %d" % (
        prel.max(), lrel.max(), float(np.abs(wl).max()), len(model.graph.node), model.opset_import[0].version)


def main():
    if len(sys.argv) < 3:
        print(__doc__)
        return 2
    d, failed = sys.argv[1], 0
    for name in sys.argv[2:]:
        try:
            ok, what = check(d, name)
        except Exception as e:  # a model the checker or the runtime refuses: that model fails
            ok, what = False, "%s: %s" % (type(e).__name__, str(e).splitlines()[0] if str(e) else "")
        print("%-18s %s  %s" % (name, "ok  " if ok else "FAIL", what))
        failed += not ok
    print("%d of %d models agree with nvcnn (onnx %s, onnxruntime %s)" % (len(sys.argv) - 2 - failed, len(sys.argv) - 2,
                                                                          onnx.__version__, ort.__version__))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
