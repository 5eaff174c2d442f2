#!/usr/bin/env python3
"""GPU restore peers of bench/gpu_resume.sh: torch.load(map_location=DEVICE) and safetensors'
load_file(device=DEVICE) of the state cuda_restore_bench restores (bench/bench_state.h shapes),
timed inside Python with the device synchronised, warm (page cache) and, as root, cold.

  python bench/gpu_peers.py --device cuda:0 --mb 1024 --tensor-mb 64 --small 256
  python bench/gpu_peers.py --device cpu --mb 64      # CPU-side dry run of the same code
Prints "PEER <warm|cold> <name> <seconds> <GB/s>" lines; a peer whose library is missing is
skipped with a note.
"""
import argparse
import os
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from restore_bench import make_cold, make_warm, shapes  # noqa: E402  (the same state)


def sync(torch, device):
    if device.startswith("cuda"):
        torch.cuda.synchronize(device)


def timed(fn, path, reps, cold):
    times = []
    for _ in range(reps):
        make_cold(path) if cold else make_warm(path)
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cuda:0")
    ap.add_argument("--mb", type=int, default=1024)
    ap.add_argument("--tensor-mb", type=int, default=64)
    ap.add_argument("--small", type=int, default=256)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--cold-reps", type=int, default=2)
    a = ap.parse_args()
    import torch
    if a.device.startswith("cuda") and not torch.cuda.is_available():
        print(f"gpu_peers: torch {torch.__version__} sees no CUDA device; peers skipped")
        return
    state = {n: torch.rand(k) for n, k in shapes(a.mb, a.tensor_mb, a.small)}
    nbytes = sum(t.numel() * 4 for t in state.values())
    cold_ok = os.geteuid() == 0
    with tempfile.TemporaryDirectory(prefix="ckpt-gpu-peers-") as d:
        peers = []
        pt = os.path.join(d, "state.pt")
        torch.save(state, pt)

        def torch_load():
            out = torch.load(pt, map_location=a.device)
            sync(torch, a.device)
            return out

        peers.append((f"torch.load(map_location={a.device!r}) torch {torch.__version__}", pt,
                      torch_load))
        try:
            import safetensors
            from safetensors.torch import load_file, save_file
            st = os.path.join(d, "state.safetensors")
            save_file(state, st)

            def st_load():
                out = load_file(st, device=a.device)
                sync(torch, a.device)
                return out

            peers.append((f"safetensors load_file(device={a.device!r}) {safetensors.__version__}",
                          st, st_load))
        except ImportError:
            print("gpu_peers: safetensors not installed; that peer skipped")
        del state
        for name, path, fn in peers:
            fn()  # first touch: CUDA context, allocator
            s = timed(fn, path, a.reps, False)
            print(f"PEER warm {name:60s} {s:8.4f} s {nbytes / 1e9 / s:7.2f} GB/s")
            if cold_ok and a.cold_reps:
                s = timed(fn, path, a.cold_reps, True)
                print(f"PEER cold {name:60s} {s:8.4f} s {nbytes / 1e9 / s:7.2f} GB/s")
    if not cold_ok:
        print("gpu_peers: not root, cold runs skipped")


if __name__ == "__main__":
    main()
