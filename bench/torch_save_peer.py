#!/usr/bin/python3
"""The torch.save + fsync peer of save_restore_bench, timed inside Python.

Builds the state save_restore_bench builds (--mb of float32 tensors of --tensor-mb MiB in "model",
--small optimizer moments of 4 B..64 KiB, one counter), prints "ready <tensor bytes> <torch
version>", then serves one request per stdin line: "save PATH" runs torch.save(state, PATH) into a
fresh file, fsyncs it, removes it, and prints the seconds of torch.save + fsync. The
bench starts it with --torch-peer and interleaves its saves with its own, so both are measured
under the same load. Run with Debian's python (torch 1.13) or any other torch.
"""
import argparse
import os
import sys
import time

import torch


def build_state(mb, tensor_mb, small):
    big = max(1, mb // tensor_mb)
    model = {f"layer{i}.weight": torch.rand(tensor_mb << 18) for i in range(big)}
    state = {f"p{i}": {"exp_avg": torch.rand(1 + (i * 2654435761) % 16384)} for i in range(small)}
    return {"model": model, "optimizer": {"state": state}, "train": {"global_step": 1}}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", type=int, default=512)
    ap.add_argument("--tensor-mb", type=int, default=8)
    ap.add_argument("--small", type=int, default=256)
    a = ap.parse_args()
    state = build_state(a.mb, a.tensor_mb, a.small)
    nbytes = sum(t.numel() * 4 for t in state["model"].values())
    nbytes += sum(s["exp_avg"].numel() * 4 for s in state["optimizer"]["state"].values())
    print(f"ready {nbytes} {torch.__version__}", flush=True)
    for line in sys.stdin:
        cmd, _, path = line.strip().partition(" ")
        if cmd != "save" or not path:
            print("error: expected 'save PATH'", flush=True)
            continue
        t0 = time.perf_counter()
        torch.save(state, path)  # a path, not a file object: torch's own C++ zip writer
        fd = os.open(path, os.O_RDONLY)
        os.fsync(fd)
        os.close(fd)
        secs = time.perf_counter() - t0
        os.unlink(path)
        print(f"{secs:.6f}", flush=True)


if __name__ == "__main__":
    main()
