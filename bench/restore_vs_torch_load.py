#!/usr/bin/python3
"""torch.load vs ckpt's restore of a state of the same shape, both from the page cache (WARM).

Builds the state save_restore_bench builds (N float32 tensors of --tensor-mb MiB in "model" and
--small small optimizer moments), torch.save's it, times torch.load (median of --reps, file read
once beforehand so it is in the page cache), then runs save_restore_bench with the same flags and
takes its WARM "resume::restore_rank (verify)" line. Prints both rates and the ratio (DESIGN.md
target: restore >= 3x faster than torch.load). torch.load allocates its tensors; our restore
writes in place into pre-touched memory, which is how a resume into an existing model runs.

Run with Debian's python (torch 1.13):
  /usr/bin/python3 bench/restore_vs_torch_load.py --bench build-resume/bench/save_restore_bench
"""
import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

import torch


def build_state(mb, tensor_mb, small):
    big = max(1, mb // tensor_mb)
    model = {f"layer{i}.weight": torch.rand(tensor_mb << 18) for i in range(big)}
    state = {f"p{i}": {"exp_avg": torch.rand(1 + (i * 2654435761) % 16384)} for i in range(small)}
    return {"model": model, "optimizer": {"state": state}, "train": {"global_step": 1}}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bench", required=True, help="path to the save_restore_bench binary")
    ap.add_argument("--mb", type=int, default=512)
    ap.add_argument("--tensor-mb", type=int, default=8)
    ap.add_argument("--small", type=int, default=256)
    ap.add_argument("--reps", type=int, default=5)
    a = ap.parse_args()

    state = build_state(a.mb, a.tensor_mb, a.small)
    nbytes = sum(t.numel() * 4 for t in state["model"].values())
    nbytes += sum(s["exp_avg"].numel() * 4 for s in state["optimizer"]["state"].values())
    with tempfile.TemporaryDirectory(prefix="ckpt-torch-bench-") as d:
        path = os.path.join(d, "state.pt")
        torch.save(state, path)
        del state
        with open(path, "rb") as f:  # into the page cache
            while f.read(8 << 20):
                pass
        times = []
        for _ in range(a.reps):
            t0 = time.perf_counter()
            loaded = torch.load(path)
            times.append(time.perf_counter() - t0)
            del loaded
    torch_mbs = nbytes / 1e6 / statistics.median(times)

    out = subprocess.run([a.bench, "--mb", str(a.mb), "--tensor-mb", str(a.tensor_mb),
                          "--small", str(a.small), "--reps", str(a.reps), "--cold-reps", "0"],
                         check=True, capture_output=True, text=True).stdout
    warm = out.split("(b) restore WARM")[1]
    m = re.search(r"resume::restore_rank \(verify\)\s+[\d.]+ s\s+(\d+) MB/s", warm)
    if m is None:
        sys.exit("could not find the restore_rank line in the bench output:\n" + out)
    ours = float(m.group(1))
    print(f"state: {nbytes / 1e6:.1f} MB, torch {torch.__version__}, load average "
          f"{os.getloadavg()[0]:.2f}")
    print(f"  torch.load (WARM, allocates)                 {statistics.median(times):8.3f} s "
          f"{torch_mbs:9.0f} MB/s")
    print(f"  resume::restore_rank (WARM, verify, in place)           {ours:9.0f} MB/s")
    print(f"  ratio: restore is {ours / torch_mbs:.2f}x torch.load (target >= 3x)")


if __name__ == "__main__":
    main()
