#!/usr/bin/env python3
"""Scales a real DDP trace up to many ranks and steps, for timing `ckpt profile analyze`.

    python3 profile/bench/make_many_ranks.py fixtures/profile/ddp_straggler/rank0.pt.trace.json.gz \
        /tmp/many 128 1000
    /usr/bin/time -v build/cli/ckpt profile analyze /tmp/many > /dev/null
Each output rank repeats the input's steps (its events shifted in time, step numbers renumbered)
until it has STEPS ProfilerStep windows, and is written as rankN.pt.trace.json.gz with its rank in
distributedInfo. Every rank gets a little jitter so the ranks are not identical.
"""
import gzip
import json
import os
import random
import sys


def main():
    src, out, ranks, steps = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    with gzip.open(src, "rt") as f:
        doc = json.load(f)
    ev = doc["traceEvents"]
    wins = sorted((e for e in ev if e["name"].startswith("ProfilerStep#")), key=lambda e: e["ts"])
    t0, t1 = wins[0]["ts"], wins[-1]["ts"] + wins[-1]["dur"]
    span, n = t1 - t0, len(wins)
    body = [e for e in ev if t0 <= e["ts"] < t1]
    os.makedirs(out, exist_ok=True)
    for r in range(ranks):
        rng = random.Random(r)
        events, reps = [], (steps + n - 1) // n
        for k in range(reps):
            shift = k * span
            for e in body:
                x = dict(e)
                x["ts"] = round(e["ts"] + shift + rng.uniform(0, 5), 1)
                if x["name"].startswith("ProfilerStep#"):
                    idx = k * n + wins.index(e)
                    if idx >= steps:
                        continue
                    x["name"] = "ProfilerStep#%d" % idx
                events.append(x)
        d = dict(doc, traceEvents=events, distributedInfo=dict(doc["distributedInfo"], rank=r,
                                                                world_size=ranks))
        with gzip.open(os.path.join(out, "rank%d.pt.trace.json.gz" % r), "wt", compresslevel=1) as f:
            json.dump(d, f, separators=(",", ":"))


if __name__ == "__main__":
    main()
