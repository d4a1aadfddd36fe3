#!/usr/bin/env python3
"""Checks a trace written by nvcnn --profile=FILE (the Chrome trace-event format), with Python's
own json module and by its structure:

  - the file is JSON: an object with "traceEvents" (a list) and "otherData" (the run's metadata);
  - on every track (pid, tid), in file order, the times never go back, every "B" has its "E" (same
    name, not earlier), and every "E" closes the event opened last: the events nest;
  - the host track holds one "step N" event per profiled step (--steps), nothing outside them;
    each step holds a "forward" event with one event per layer (--layers of them, each with its
    type and output shape) and, unless --forward_only, a "backward" event with one per layer;
  - the step's time is covered by its innermost events (layers and phases: the input's wait, the
    weight-decay loss, the zeroing of the gradients, the allreduce's wait, the optimizer): their
    sum is at most the step's time and at least --cover times it;
  - with --gpu, the GPU track holds the layers' forward and backward for each step as well, and
    with --emulated the metadata says that their times are the emulated device's;
  - with --buckets, the allreduce track holds at least one bucket per step.

Prints one line "trace ok: ..." (coverage included) and exits 0, or one line per problem and 1.
Usage: check_trace.py FILE --steps N --layers L [--cover 0.97] [--forward_only] [--gpu [--emulated]] [--buckets]
"""
import argparse
import json
import sys


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("file")
    ap.add_argument("--steps", type=int, required=True)
    ap.add_argument("--layers", type=int, required=True)
    ap.add_argument("--cover", type=float, default=0.97)
    ap.add_argument("--forward_only", action="store_true")
    ap.add_argument("--gpu", action="store_true")
    ap.add_argument("--emulated", action="store_true")
    ap.add_argument("--buckets", action="store_true")
    a = ap.parse_args()
    problems = []

    def bad(msg):
        problems.append(msg)

    with open(a.file) as f:
        doc = json.load(f)
    if not isinstance(doc, dict) or not isinstance(doc.get("traceEvents"), list):
        print("%s: not a trace-event object (no traceEvents list)" % a.file)
        return 1
    meta = doc.get("otherData", {})
    for key in ("model", "device", "clock", "steps"):
        if key not in meta:
            bad("otherData has no %r" % key)
    if a.emulated and "EMULATED" not in meta.get("clock", ""):
        bad("the metadata does not say that the GPU times are the emulated device's: %r" % meta.get("clock"))

    # every track: B/E pairs nested, times in order; the tree of events per track
    tracks = {}
    for e in doc["traceEvents"]:
        if e.get("ph") == "M":
            continue
        if e.get("ph") not in ("B", "E"):
            bad("event of phase %r (only B/E and metadata expected): %r" % (e.get("ph"), e))
            continue
        tracks.setdefault((e["pid"], e["tid"]), []).append(e)
    trees = {}
    for key, evs in tracks.items():
        stack, roots, last = [], [], None
        for e in evs:
            ts = float(e["ts"])
            if last is not None and ts < last:
                bad("track %s: time goes back at %r" % (key, e))
            last = ts
            if e["ph"] == "B":
                node = {"name": e["name"], "cat": e.get("cat"), "args": e.get("args", {}), "t0": ts, "kids": []}
                (stack[-1]["kids"] if stack else roots).append(node)
                stack.append(node)
            else:
                if not stack:
                    bad("track %s: an end without a begin: %r" % (key, e))
                    continue
                node = stack.pop()
                if node["name"] != e["name"]:
                    bad("track %s: %r ends while %r is open (events do not nest)" % (key, e["name"], node["name"]))
                node["t1"] = ts
        for node in stack:
            bad("track %s: %r begins and never ends" % (key, node["name"]))
        trees[key] = roots

    def leaves(node):
        if not node["kids"]:
            return [node]
        return [x for k in node["kids"] for x in leaves(k)]

    def check_layers(step, phase, where):
        names = [k for k in step["kids"] if k["name"] == phase]
        if len(names) != 1:
            bad("%s %s: %d %r events (1 expected)" % (where, step["name"], len(names), phase))
            return
        layers = names[0]["kids"]
        idx = sorted(k["args"].get("layer", -1) for k in layers if k["cat"] == phase)
        if idx != list(range(a.layers)):
            bad("%s %s %s: layers %s, expected 0..%d once each" % (where, step["name"], phase, idx[:8], a.layers - 1))
        for k in layers:
            if k["cat"] == phase and not (k["args"].get("type") and k["args"].get("shape")):
                bad("%s %s: layer %s without its type and shape" % (where, step["name"], k["name"]))

    host = [k for k in trees if k[1] == 1]
    if len(host) != 1:
        bad("%d host tracks (tid 1), expected 1" % len(host))
        host_roots = []
    else:
        host_roots = trees[host[0]]
    steps = [r for r in host_roots if r["name"].startswith("step ")]
    if len(steps) != a.steps or len(steps) != len(host_roots):
        bad("host track: %d steps and %d other top-level events, expected %d steps" % (len(steps), len(host_roots) - len(steps), a.steps))
    cover = []
    for s in steps:
        dur = s["t1"] - s["t0"]
        if not a.gpu:  # on the GPU backend the layers are on the GPU's track
            check_layers(s, "forward", "host")
            if not a.forward_only:
                check_layers(s, "backward", "host")
        inner = [x for x in leaves(s) if x is not s]
        covered = sum(x["t1"] - x["t0"] for x in inner)
        # the times are written to 0.001 us: each event may gain that much in rounding
        if dur <= 0 or covered > dur + 0.002 * len(inner):
            bad("%s: its events cover %.3f us of %.3f us (more than the step)" % (s["name"], covered, dur))
        if not a.gpu:
            cover.append(covered / dur if dur > 0 else 0)
    if cover and min(cover) < a.cover:
        bad("the innermost events cover %.2f %% of a step, less than %.0f %%" % (100 * min(cover), 100 * a.cover))
    if a.gpu:
        gpu = [k for k in trees if k[1] == 3]
        gsteps = trees[gpu[0]] if gpu else []
        if len(gsteps) != a.steps:
            bad("GPU track: %d steps, expected %d" % (len(gsteps), a.steps))
        for s in gsteps:
            check_layers(s, "forward", "gpu")
            if not a.forward_only:
                check_layers(s, "backward", "gpu")
    if a.buckets:
        b = [k for k in trees if k[1] == 2]
        n = len(trees[b[0]]) if b else 0
        if n < a.steps:
            bad("allreduce track: %d buckets for %d steps" % (n, a.steps))
    if problems:
        for p in problems[:20]:
            print("%s: %s" % (a.file, p))
        return 1
    c = " host events cover %.2f %% of the steps (the least %.2f %%)," % (100 * sum(cover) / len(cover), 100 * min(cover)) if cover else ""
    print("trace ok: %d steps of %s, %d layers,%s %d events" % (len(steps), meta.get("model"), a.layers, c,
                                                           sum(len(v) for v in tracks.values())))
    return 0


if __name__ == "__main__":
    sys.exit(main())
