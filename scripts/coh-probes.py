#!/usr/bin/env python3
"""Summarises upload probes (src/coherence/probe.h) per upload.

    scripts/coh-probes.py FILE

FILE: what a build with -DMT_COH_PROBES=ON wrote with MT_COH_PROBES_OUT set.
For each upload (a "sync" with a target), in microseconds after it began:
when its first chunk was collected, when the copy engine's first piece was
submitted, how long the copy engine sat idle between pieces, how long it
was busy (a piece counts from its submit, or from the end of the one before
it, to its completion), when the last piece completed and when the planner
finished; then the number of pieces. Copy-engine events are those of
engine 1 (MT_COH_ENGINE_COPY) after the sync began."""
import sys


def uploads(path):
    cur = None
    for line in open(path):
        f = line.split()
        if len(f) != 4:
            continue
        t, what, a = float(f[0]), f[1], int(f[2])
        if what == "sync":
            if cur:
                yield cur
            cur = {"chunk0": None, "submits": [], "dones": [], "end": None}
            continue
        if cur is None:
            continue
        if what == "chunk" and cur["chunk0"] is None:
            cur["chunk0"] = t
        elif what in ("sub1", "dsub1") and a == 1:
            cur["submits"].append(t)
        elif what == "done" and a == 1:
            cur["dones"].append(t)
        elif what == "syncend":
            cur["end"] = t
    if cur:
        yield cur


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    print("%4s %8s %8s %8s %8s %8s %8s %6s" % ("sync", "chunk0", "first", "idle", "busy",
                                               "last", "planner", "pieces"))
    for i, u in enumerate(uploads(sys.argv[1]), 1):
        n = min(len(u["submits"]), len(u["dones"]))
        prev, busy, idle = None, 0.0, 0.0
        for s, d in zip(u["submits"][:n], u["dones"][:n]):
            start = s if prev is None or s > prev else prev
            if prev is not None and s > prev:
                idle += s - prev
            busy += d - start
            prev = d
        fmt = lambda v: "%8.0f" % v if v is not None else "%8s" % "-"
        print("%4d %s %s %8.0f %8.0f %s %s %6d" % (i, fmt(u["chunk0"]),
              fmt(u["submits"][0] if n else None), idle, busy, fmt(prev), fmt(u["end"]), n))


if __name__ == "__main__":
    main()
