#!/usr/bin/env python3
"""Writes data/fixtures/tb-scalars.tfevents with TensorBoard's own event protos and record writer,
and data/fixtures/tb-scalars.expected with what TensorBoard's EventAccumulator reads back from it.
tests/test_events.c encodes the same scalars with nvcnn's writer and compares the bytes, and
checks that every scalar (zeros included) is present.

Run once in a throwaway environment with TensorBoard installed:
    python3 -m venv /tmp/tbenv && /tmp/tbenv/bin/pip install tensorboard
    /tmp/tbenv/bin/python scripts/make_fixtures_events.py
`make test` only reads the committed output.

expected format, one line per event:  <wall_time> <step> <n> then n lines "<value>\t<tag>"
(values as %.9g of the float TensorBoard holds).

It also writes data/fixtures/tb-session-start.tfevents: one Event(wall_time=1700000003.5, step=53,
session_log=SessionLog(status=START)), the record a resumed run writes first, checked byte for byte
against nvcnn's; and data/fixtures/tb-resume.expected: the steps of "total loss avg" that
EventAccumulator keeps from two files, a run's that reached step 60 and a resumed run's that starts
with that record at step 53 (the first run's steps 53 and later dropped).
"""
import os

from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from tensorboard.compat.proto import event_pb2, summary_pb2
from tensorboard.summary.writer.record_writer import RecordWriter

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "data", "fixtures")

# (wall_time, step, [(tag, value)]): nvcnn's tags, with zeros where a real run has them
EVENTS = [
    (1700000000.25, 1, [("total loss raw", 2.3125), ("total loss avg", 2.3125), ("learning rate", 0.05),
                        ("train accuracy top-1 %", 0.0), ("train accuracy top-5 %", 50.0), ("images/sec", 812.5)]),
    (1700000001.5, 2, [("total loss raw", 0.0), ("learning rate", 0.0), ("train accuracy top-1 %", 12.5)]),
    (1700000002.75, 30, [("validation accuracy top-1 %", 0.0), ("validation accuracy top-5 %", 100.0)]),
]


def main():
    path = os.path.join(OUT, "tb-scalars.tfevents")
    with open(path, "wb") as f:
        w = RecordWriter(f)
        for wall, step, scalars in EVENTS:
            ev = event_pb2.Event(wall_time=wall, step=step)
            ev.summary.CopyFrom(summary_pb2.Summary(
                value=[summary_pb2.Summary.Value(tag=t, simple_value=v) for t, v in scalars]))
            w.write(ev.SerializeToString())
        w.flush()
    # read back with TensorBoard's reader (it wants the events.out.tfevents name pattern)
    link = os.path.join(OUT, "events.out.tfevents.fixture")
    os.symlink(os.path.basename(path), link)
    try:
        acc = EventAccumulator(link, size_guidance={"scalars": 0})
        acc.Reload()
        got = {}
        for tag in acc.Tags()["scalars"]:
            for s in acc.Scalars(tag):
                got.setdefault((s.wall_time, s.step), []).append((tag, s.value))
    finally:
        os.unlink(link)
    with open(os.path.join(OUT, "tb-scalars.expected"), "w") as f:
        for wall, step, scalars in EVENTS:
            read = dict(got[(wall, step)])
            assert len(read) == len(scalars), (step, read)  # every scalar, zeros included
            f.write("%.17g %d %d\n" % (wall, step, len(scalars)))
            for tag, _ in scalars:
                f.write("%.9g\t%s\n" % (read[tag], tag))


def session_start(wall, step):
    return event_pb2.Event(wall_time=wall, step=step,
                           session_log=event_pb2.SessionLog(status=event_pb2.SessionLog.START))


def scalar(wall, step, value):
    ev = event_pb2.Event(wall_time=wall, step=step)
    ev.summary.CopyFrom(summary_pb2.Summary(value=[summary_pb2.Summary.Value(tag="total loss avg",
                                                                             simple_value=value)]))
    return ev


def resume_fixtures():
    with open(os.path.join(OUT, "tb-session-start.tfevents"), "wb") as f:
        w = RecordWriter(f)
        w.write(session_start(1700000003.5, 53).SerializeToString())
        w.flush()
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        runs = [("events.out.tfevents.1700000000.a", [scalar(1700000000.0 + s, s, 10.0 - s / 10) for s in (1, 20, 40, 53, 60)]),
                ("events.out.tfevents.1700000100.a", [session_start(1700000100.0, 53)] +
                 [scalar(1700000100.0 + s, s, 5.0 - s / 100) for s in (53, 70)])]
        for name, events in runs:
            with open(os.path.join(d, name), "wb") as f:
                w = RecordWriter(f)
                w.write(event_pb2.Event(wall_time=events[0].wall_time, file_version="brain.Event:2").SerializeToString())
                for ev in events:
                    w.write(ev.SerializeToString())
                w.flush()
        acc = EventAccumulator(d, size_guidance={"scalars": 0}, purge_orphaned_data=True)
        acc.Reload()
        kept = [(s.step, s.value) for s in acc.Scalars("total loss avg")]
    with open(os.path.join(OUT, "tb-resume.expected"), "w") as f:
        f.write(" ".join("%d:%.9g" % kv for kv in kept) + "\n")


if __name__ == "__main__":
    main()
    resume_fixtures()
