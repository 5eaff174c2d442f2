#!/usr/bin/python3
"""Benchmark: `ckpt audit` (metadata only) against `torch.load(map_location="cpu")` on one file.

The design's goal: auditing a multi-GB .pt without --deep costs milliseconds plus the pickle size,
at least 50x faster than loading it. This script writes a >= 2 GiB torch.save file (a dict of
large float32 tensors, the shape of a big model state_dict) into a temporary folder with Debian's
torch, then times both readers on the same file in the same run and prints the times and the
ratio. The file is removed at the end.

    /usr/bin/python3 bench/audit_bench.py [CKPT_BINARY] [--gib 2] [--repeats 5]

CKPT_BINARY defaults to build/cli/ckpt. Both readers run with the file in the page cache (it was
just written, and torch.load runs once before timing); the comparison is CPU and parsing cost, not
disk speed. Exit status: 0 goal met, 1 goal missed, 2 the audit failed to run.
"""
import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

GOAL = 50.0


def make_checkpoint(path, gib):
    import torch
    # 64 MiB tensors: few enough to keep the pickle small, many enough to look like a model.
    numel = 16 * 1024 * 1024
    count = max(1, int(round(gib * 1024 / 64)))
    state = {f"layers.{i}.weight": torch.ones(numel, dtype=torch.float32) for i in range(count)}
    t0 = time.perf_counter()
    torch.save(state, path)
    return count, time.perf_counter() - t0


def time_audit(ckpt, path, repeats):
    times, rc, out = [], None, b""
    for _ in range(repeats):
        t0 = time.perf_counter()
        p = subprocess.run([ckpt, "audit", "--json", path], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE)
        times.append(time.perf_counter() - t0)
        rc, out = p.returncode, p.stdout + p.stderr
    return times, rc, out


def time_torch_load(path, repeats):
    import torch
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        obj = torch.load(path, map_location="cpu")
        times.append(time.perf_counter() - t0)
        del obj
    return times


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("ckpt", nargs="?", default="build/cli/ckpt", help="path of the ckpt binary")
    ap.add_argument("--gib", type=float, default=2.0, help="checkpoint size in GiB (>= 2 for the goal)")
    ap.add_argument("--repeats", type=int, default=5, help="timed runs of the audit")
    ap.add_argument("--load-repeats", type=int, default=2, help="timed runs of torch.load")
    args = ap.parse_args()

    if not (os.path.isfile(args.ckpt) and os.access(args.ckpt, os.X_OK)):
        print(f"audit_bench: no ckpt executable at {args.ckpt}", file=sys.stderr)
        return 2
    # `ckpt audit --help` exits 0 even without the subcommand (CLI11 answers --help first), so
    # look for an `audit` line in the list of subcommands instead.
    probe = subprocess.run([args.ckpt, "--help"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    if not re.search(rb"^\s+audit\b", probe.stdout, re.MULTILINE):
        print(f"audit_bench: {args.ckpt} has no working `audit` subcommand: "
              f"{probe.stdout.decode(errors='replace').strip()[:500]}", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="ckpt_audit_bench_") as tmp:
        path = os.path.join(tmp, "big.pt")
        count, save_s = make_checkpoint(path, args.gib)
        size = os.path.getsize(path)
        print(f"file: {path}: {size / 2**30:.2f} GiB, {count} tensors (torch.save {save_s:.1f} s)")

        audit_times, rc, out = time_audit(args.ckpt, path, args.repeats)
        # 0 complete, 2 incomplete: both are successful audits (this file is weights only).
        if rc not in (0, 2):
            print(f"audit_bench: `ckpt audit` exited {rc}: {out.decode(errors='replace')[:2000]}",
                  file=sys.stderr)
            return 2
        time_torch_load(path, 1)  # warm-up: page cache and allocator, not timed
        load_times = time_torch_load(path, args.load_repeats)

    audit_s = statistics.median(audit_times)
    load_s = statistics.median(load_times)
    ratio = load_s / audit_s if audit_s > 0 else float("inf")
    print(f"ckpt audit (metadata only): median {audit_s * 1e3:.1f} ms over {len(audit_times)} runs "
          f"(min {min(audit_times) * 1e3:.1f} ms; includes process start)")
    print(f"torch.load(map_location='cpu'): median {load_s * 1e3:.1f} ms over {len(load_times)} runs")
    print(f"ratio torch.load / ckpt audit: {ratio:.1f}x (goal >= {GOAL:.0f}x): "
          f"{'met' if ratio >= GOAL else 'MISSED'}")
    return 0 if ratio >= GOAL else 1


if __name__ == "__main__":
    sys.exit(main())
