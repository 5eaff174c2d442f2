#!/usr/bin/python3
"""Restore benchmark: ckpt's library restore against the peers a user would pick, same state.

The state is restore_bench's (N float32 tensors of --tensor-mb MiB plus --small small ones):
  * ckpt: bench/restore_bench (C++), the library restore as Checkpointer::restore_latest calls it
    (verified: tensor + whole-file hashes checked first, then the copy), the snapshot-and-roll-back
    restore it replaced, one hashed read with no rollback, unverified, raw pread 1/N threads;
  * torch.load + copy_ into existing tensors (this interpreter's torch; Debian's torch 1.13 in CI),
    timed inside Python;
  * safetensors loading into existing numpy arrays (safe_open + get_tensor + np.copyto), run by
    --st-python (default /work/venv2/bin/python); skipped with a note when that interpreter has no
    safetensors (CI never depends on it).
Warm = file in the page cache; cold = page cache dropped before every run with
`echo 3 > /proc/sys/vm/drop_caches` (root), else posix_fadvise(DONTNEED) on the file (printed).
Medians of --reps runs. Prints every rate and the goals of issue 9 with met/missed.

  /usr/bin/python3 bench/restore_bench.py --bench build/bench/restore_bench
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time


def make_cold(path):
    os.sync()
    try:
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
        return "drop_caches"
    except OSError:
        fd = os.open(path, os.O_RDONLY)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        os.close(fd)
        return "fadvise"


def make_warm(path):
    with open(path, "rb") as f:
        while f.read(8 << 20):
            pass


def shapes(mb, tensor_mb, small):
    """(name, float32 element count) of restore_bench's state (bench/bench_state.h)."""
    out = [(f"model.layer{i}.weight", tensor_mb << 18) for i in range(max(1, mb // tensor_mb))]
    out += [(f"optimizer.p{i}.exp_avg", 1 + (i * 2654435761) % 16384) for i in range(small)]
    return out


def timed_runs(fn, path, reps, cold):
    times, how = [], None
    for _ in range(reps):
        if cold:
            how = make_cold(path)
        else:
            make_warm(path)
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), how


def torch_peer(a, d):
    import torch
    state = {n: torch.rand(k) for n, k in shapes(a.mb, a.tensor_mb, a.small)}
    path = os.path.join(d, "state.pt")
    torch.save(state, path)
    live = {n: torch.zeros_like(t) for n, t in state.items()}  # the model's existing tensors
    del state

    def load():
        loaded = torch.load(path)
        with torch.no_grad():
            for n, t in loaded.items():
                live[n].copy_(t)

    res = {"version": torch.__version__}
    res["warm"], _ = timed_runs(load, path, a.reps, False)
    if a.cold_reps:
        res["cold"], res["cold_how"] = timed_runs(load, path, a.cold_reps, True)
    return res


def safetensors_peer(a):
    """Runs in --st-python: prints a JSON line."""
    import numpy as np
    from safetensors import safe_open
    from safetensors.numpy import save_file
    import safetensors
    rng = np.random.default_rng(0)
    state = {n: rng.random(k, dtype=np.float32) for n, k in shapes(a.mb, a.tensor_mb, a.small)}
    with tempfile.TemporaryDirectory(prefix="ckpt-st-bench-") as d:
        path = os.path.join(d, "state.safetensors")
        save_file(state, path)
        live = {n: np.zeros_like(t) for n, t in state.items()}
        del state

        def load():
            with safe_open(path, "np") as f:
                for n in f.keys():
                    np.copyto(live[n], f.get_tensor(n))

        res = {"version": safetensors.__version__}
        res["warm"], _ = timed_runs(load, path, a.reps, False)
        if a.cold_reps:
            res["cold"], res["cold_how"] = timed_runs(load, path, a.cold_reps, True)
    print(json.dumps(res))


def run_safetensors(a):
    if not a.st_python or not os.path.exists(a.st_python):
        return None, f"no interpreter {a.st_python!r}"
    probe = subprocess.run([a.st_python, "-c", "import safetensors, numpy"], capture_output=True)
    if probe.returncode != 0:
        return None, f"{a.st_python} has no safetensors/numpy"
    out = subprocess.run([a.st_python, __file__, "--peer", "safetensors", "--mb", str(a.mb),
                          "--tensor-mb", str(a.tensor_mb), "--small", str(a.small),
                          "--reps", str(a.reps), "--cold-reps", str(a.cold_reps)],
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1]), None


def run_ckpt(a):
    out = subprocess.run([a.bench, "--mb", str(a.mb), "--tensor-mb", str(a.tensor_mb), "--small",
                          str(a.small), "--reps", str(a.reps), "--cold-reps", str(a.cold_reps)],
                         check=True, capture_output=True, text=True).stdout
    res = {}
    for line in out.splitlines():
        m = re.match(r"RESULT (warm|cold) (.+?)\s+([\d.]+) s\s+\d+ MB/s$", line)
        if m:
            res[(m.group(1), m.group(2).strip())] = float(m.group(3))
    return res, out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bench", help="path to the restore_bench binary")
    ap.add_argument("--st-python", default="/work/venv2/bin/python")
    ap.add_argument("--mb", type=int, default=512)
    ap.add_argument("--tensor-mb", type=int, default=8)
    ap.add_argument("--small", type=int, default=256)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--cold-reps", type=int, default=3)
    ap.add_argument("--peer", choices=["safetensors"], help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.peer == "safetensors":
        return safetensors_peer(a)
    if not a.bench:
        sys.exit("--bench is required")

    ours, text = run_ckpt(a)
    print(text, end="")
    nbytes = 4 * sum(k for _, k in shapes(a.mb, a.tensor_mb, a.small))
    with tempfile.TemporaryDirectory(prefix="ckpt-torch-bench-") as d:
        tp = torch_peer(a, d)
    st, why = run_safetensors(a)

    def rate(s):
        return nbytes / 1e6 / s

    kinds = ["warm"] + (["cold"] if a.cold_reps else [])
    for kind in kinds:
        print(f"\n{kind.upper()}: {nbytes / 1e6:.1f} MB of tensors")
        rows = [(n, s) for (k, n), s in ours.items() if k == kind]
        rows.append((f"torch.load + copy_ (torch {tp['version']})", tp[kind]))
        if st is not None:
            rows.append((f"safetensors into existing arrays ({st['version']})", st[kind]))
        for n, s in rows:
            print(f"  {n:56s} {s:8.4f} s {rate(s):9.0f} MB/s")
        if kind == "cold":
            print(f"  (cold: peers dropped the cache with {tp.get('cold_how')})")
    if st is None:
        print(f"\nsafetensors peer skipped: {why}")

    lib = ours[("warm", "library restore, verified (as restore_latest)")]
    unv = ours[("warm", "library restore, unverified")]
    raw_n = ours[("warm", "raw pread, N threads")]
    print("\nGoals (issue 9):")

    def goal(text, ratio, target):
        print(f"  {text}: {ratio:.2f}x (goal >= {target}x) — {'met' if ratio >= target else 'missed'}")

    if st is not None:
        goal("verified restore vs safetensors into existing arrays, warm", st["warm"] / lib, 0.8)
    goal("verified restore vs torch.load + copy_, warm", tp["warm"] / lib, 3)
    goal("unverified restore vs raw pread N threads, warm", raw_n / unv, 0.9)
    if a.cold_reps:
        best_raw = min(ours[("cold", "raw pread, 1 thread")], ours[("cold", "raw pread, N threads")])
        goal("verified restore vs best raw pread, cold", best_raw /
             ours[("cold", "library restore, verified (as restore_latest)")], 0.9)


if __name__ == "__main__":
    main()
