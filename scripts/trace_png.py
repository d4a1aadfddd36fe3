#!/usr/bin/env python3
"""Renders one step of a trace of nvcnn --profile=FILE into a PNG: the host's events as nested
bars on a time axis (the step, forward/backward, the layers), the layers coloured by type, and a
bar chart of the time by layer type beside it. Needs matplotlib (pip install matplotlib; it is not
one of the test dependencies).
Usage: trace_png.py TRACE.json OUT.png [--step N] [--title TEXT]
"""
import argparse
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def spans(doc, tid):
    """(name, cat, args, t0, t1, depth) of the B/E pairs on track tid of the first process."""
    out, stack = [], []
    for e in doc["traceEvents"]:
        if e.get("ph") not in ("B", "E") or e["tid"] != tid:
            continue
        if e["ph"] == "B":
            stack.append(e)
        else:
            b = stack.pop()
            out.append((b["name"], b.get("cat"), b.get("args", {}), b["ts"] / 1e3, e["ts"] / 1e3, len(stack)))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("trace")
    ap.add_argument("out")
    ap.add_argument("--step", type=int, default=None, help="the step to draw (default: the first)")
    ap.add_argument("--title", default=None)
    a = ap.parse_args()
    doc = json.load(open(a.trace))
    meta = doc.get("otherData", {})
    ev = spans(doc, 1)
    steps = [s for s in ev if s[1] == "step"]
    step = steps[0] if a.step is None else [s for s in steps if s[0] == "step %d" % a.step][0]
    t0, t1 = step[3], step[4]
    inside = [s for s in ev if s[3] >= t0 and s[4] <= t1]
    types = sorted({s[2].get("type") for s in inside if s[2].get("type")})
    cmap = plt.get_cmap("tab10")
    colour = {t: cmap(i % 10) for i, t in enumerate(types)}
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(15, 4.8), gridspec_kw={"width_ratios": [3.2, 1]})
    for name, cat, args, s0, s1, depth in inside:
        y = -depth
        c = colour.get(args.get("type"), (0.75, 0.75, 0.75))
        ax.barh(y, s1 - s0, left=s0 - t0, height=0.8, color=c, edgecolor="black" if depth < 2 else c, linewidth=0.3)
        if (s1 - s0) > 0.04 * (t1 - t0):  # the names that fit
            label = name if depth < 2 else "%s %s" % (name, "fwd" if cat == "forward" else "bwd")
            ax.text((s0 + s1) / 2 - t0, y, label, ha="center", va="center", fontsize=7, clip_on=True)
    depth = max(s[5] for s in inside)
    ax.set_yticks([-d for d in range(depth + 1)])
    ax.set_yticklabels(["step", "phase", "layer"][: depth + 1] + [""] * max(0, depth - 2))
    ax.set_xlim(0, t1 - t0)
    ax.set_xlabel("ms from the start of %s" % step[0])
    ax.set_title(a.title or "nvcnn --profile: %s, batch %s, %s (%s)" % (meta.get("model"), meta.get("batch_size"), step[0],
                                                                       meta.get("device")), fontsize=10)
    # the time by type, forward and backward together, as a share of the step
    tot = {}
    for name, cat, args, s0, s1, d in inside:
        if args.get("type"):
            tot[args["type"]] = tot.get(args["type"], 0) + (s1 - s0)
    order = sorted(tot, key=tot.get)
    bx.barh(range(len(order)), [100 * tot[t] / (t1 - t0) for t in order], color=[colour[t] for t in order])
    bx.set_yticks(range(len(order)))
    bx.set_yticklabels(order, fontsize=8)
    bx.set_xlabel("% of the step (forward + backward)")
    for i, t in enumerate(order):
        bx.text(100 * tot[t] / (t1 - t0), i, " %.1f%%" % (100 * tot[t] / (t1 - t0)), va="center", fontsize=7)
    fig.tight_layout()
    fig.savefig(a.out, dpi=110)
    return 0


if __name__ == "__main__":
    sys.exit(main())
