#!/usr/bin/python3
"""Restore benchmark: ckpt's library restore against the peers a user would pick, same state.

The state is restore_bench's --shape (bench/bench_shapes.h: the README's 64 x 8 MiB + 256 small,
issue 26's 1,376-tensor AdamW checkpoint, GPT-2 small's weights, a Llama-like layer list with
AdamW), its tensor list taken from `restore_bench --list-tensors`, so every peer builds the same
tensors:
  * ckpt: bench/restore_bench (C++), the library restore as Checkpointer::restore_latest calls it
    (verified: tensor + whole-file hashes checked first, then the copy), `ckpt load-bench`'s load
    into fresh memory (verified), the snapshot-and-roll-back restore, one hashed read with no
    rollback, unverified, and the raw peers: a sequential read(2) of the whole file into one
    buffer, pread 1/N threads into the destinations;
  * torch.load + copy_ into existing tensors (this interpreter's torch; Debian's torch 1.13 in CI),
    timed inside Python;
  * safetensors loading into existing numpy arrays (safe_open + get_tensor + np.copyto), run by
    --st-python; skipped with a note when that interpreter has no safetensors (CI never depends
    on it).
--rounds N runs ours, torch and safetensors N times in turn (interleaved, so they see the same
load) and prints each round and the median over rounds. Warm = file in the page cache; cold =
page cache dropped before every run with `echo 3 > /proc/sys/vm/drop_caches` (root), else
posix_fadvise(DONTNEED) on the file (printed). Medians of --reps runs per round. Prints every
rate, the load average, and the goals of issues 9 and 26 with met/missed.

  /usr/bin/python3 bench/restore_bench.py --bench build/bench/restore_bench --shape adamw344 \
      --st-python .venv-st/bin/python --rounds 3 --cold-reps 0

(.venv-st: `python3 -m venv .venv-st && .venv-st/bin/pip install safetensors numpy`.)
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


def shape_args(a):
    return ["--shape", a.shape, "--mb", str(a.mb), "--tensor-mb", str(a.tensor_mb), "--small",
            str(a.small)]


def shapes(a):
    """(name, float32 element count) of restore_bench's state, from restore_bench itself."""
    if a.tensors:
        with open(a.tensors) as f:
            return [tuple(x) for x in json.load(f)]
    out = subprocess.run([a.bench] + shape_args(a) + ["--list-tensors"], check=True,
                         capture_output=True, text=True).stdout
    res = []
    for line in out.splitlines():
        _, path, nbytes = line.split()
        res.append((path.lstrip("/").replace("/", "."), int(nbytes) // 4))
    return res


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


def torch_peer(a, d, tensors):
    import torch
    state = {n: torch.rand(k) for n, k in tensors}
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
    state = {n: rng.random(k, dtype=np.float32) for n, k in shapes(a)}
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


def run_safetensors(a, tensors_file):
    if not a.st_python or not os.path.exists(a.st_python):
        return None, f"no interpreter {a.st_python!r}"
    probe = subprocess.run([a.st_python, "-c", "import safetensors, numpy"], capture_output=True)
    if probe.returncode != 0:
        return None, f"{a.st_python} has no safetensors/numpy"
    out = subprocess.run([a.st_python, __file__, "--peer", "safetensors", "--tensors",
                          tensors_file, "--reps", str(a.reps), "--cold-reps", str(a.cold_reps)],
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1]), None


def run_ckpt(a, keep_dir=None):
    extra = ["--dir", keep_dir] if keep_dir else []
    if a.only:
        extra += ["--only", a.only]
    out = subprocess.run([a.bench] + shape_args(a) + ["--reps", str(a.reps), "--cold-reps",
                                                      str(a.cold_reps)] + extra,
                         check=True, capture_output=True, text=True).stdout
    res = {}
    for line in out.splitlines():
        m = re.match(r"RESULT (warm|cold) (.+?)\s+([\d.]+) s\s+\d+ MB/s$", line)
        if m:
            res[(m.group(1), m.group(2).strip())] = float(m.group(3))
    return res, out


LIB = "library restore, verified (as restore_latest)"
LOAD = "load-bench's load, verified (as ckpt load-bench)"
UNV = "library restore, unverified"
SEQ = "raw sequential read of the file"


def sequential_read(path):
    buf = bytearray(8 << 20)
    t0 = time.perf_counter()
    with open(path, "rb", buffering=0) as f:
        while f.readinto(buf):
            pass
    return time.perf_counter() - t0


def run_cli(a, run_dir):
    """`ckpt load-bench RUN --json` as processes, each beside a sequential read of the file."""
    rank = os.path.join(run_dir, sorted(d for d in os.listdir(run_dir)
                                        if d.startswith("step-"))[-1], "rank-00000.h5")
    make_warm(rank)
    loads, allocs, seqs = [], [], []
    for _ in range(a.reps):
        seqs.append(sequential_read(rank))
        out = subprocess.run([a.cli, "load-bench", run_dir, "--json"], check=True,
                             capture_output=True, text=True).stdout
        j = json.loads(out)
        loads.append(j["seconds"])
        allocs.append(j["alloc_seconds"])
    return statistics.median(loads), statistics.median(allocs), statistics.median(seqs)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bench", help="path to the restore_bench binary")
    ap.add_argument("--st-python", default=sys.executable,
                    help="an interpreter with safetensors and numpy (default: this one)")
    ap.add_argument("--shape", default="readme", help="readme, adamw344, gpt2 or llama")
    ap.add_argument("--mb", type=int, default=512)
    ap.add_argument("--tensor-mb", type=int, default=8)
    ap.add_argument("--small", type=int, default=256)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--cold-reps", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--only", help="restore_bench --only: the methods to run (names, comma-separated "
                    "substrings); the goals of methods left out are not printed")
    ap.add_argument("--cli", help="the ckpt executable: also time `ckpt load-bench` processes")
    ap.add_argument("--peer", choices=["safetensors"], help=argparse.SUPPRESS)
    ap.add_argument("--tensors", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.peer == "safetensors":
        return safetensors_peer(a)
    if not a.bench:
        sys.exit("--bench is required")

    tensors = shapes(a)
    nbytes = 4 * sum(k for _, k in tensors)
    kinds = ["warm"] + (["cold"] if a.cold_reps else [])
    rounds = []
    why = None
    with tempfile.TemporaryDirectory(prefix="ckpt-torch-bench-") as d:
        tensors_file = os.path.join(d, "tensors.json")
        with open(tensors_file, "w") as f:
            json.dump(tensors, f)
        for r in range(a.rounds):
            load = " ".join(f"{x:.2f}" for x in os.getloadavg())
            keep = tempfile.mkdtemp(prefix="ckpt-restore-bench-", dir="/tmp") if a.cli else None
            ours, text = run_ckpt(a, keep)
            print(text, end="")
            if a.cli:
                cl, ca, cs = run_cli(a, os.path.join(keep, "run"))
                subprocess.run(["rm", "-rf", keep], check=True)
                ours[("warm", "ckpt load-bench process (its in-process seconds)")] = cl
                ours[("warm", "  its alloc_seconds (not in its time)")] = ca
                ours[("warm", "sequential read beside it (Python readinto)")] = cs
            tp = torch_peer(a, d, tensors)
            st, why = run_safetensors(a, tensors_file)
            rows = {}
            for kind in kinds:
                for (k, n), s in ours.items():
                    if k == kind:
                        rows[(kind, n)] = s
                rows[(kind, f"torch.load + copy_ (torch {tp['version']})")] = tp[kind]
                if st is not None:
                    rows[(kind, f"safetensors into existing arrays ({st['version']})")] = st[kind]
            rounds.append((load, rows, tp, st))
            print(f"round {r + 1} of {a.rounds} done (load average at its start {load})")

    def rate(s):
        return nbytes / 1e6 / s

    print(f"\nshape {a.shape}: {len(tensors)} tensors, {nbytes / 1e6:.1f} MB; "
          f"load averages at each round's start: {'; '.join(r[0] for r in rounds)}")
    names = list(rounds[0][1].keys())
    for kind in kinds:
        print(f"\n{kind.upper()} (median over rounds; per round)")
        for k, n in names:
            if k != kind:
                continue
            per = [r[1][(k, n)] for r in rounds]
            m = statistics.median(per)
            print(f"  {n:56s} {m:8.4f} s {rate(m):9.0f} MB/s   "
                  f"[{', '.join(f'{x:.4f}' for x in per)}]")
    if rounds[0][3] is None:
        print(f"\nsafetensors peer skipped: {why}")

    def goal(text, key_peer, key_ours, target, kind="warm"):
        if (kind, key_peer) not in rounds[0][1] or (kind, key_ours) not in rounds[0][1]:
            return
        per = [r[1][(kind, key_peer)] / r[1][(kind, key_ours)] for r in rounds]
        met = sum(x >= target for x in per)
        print(f"  {text}: {statistics.median(per):.2f}x (per round "
              f"{', '.join(f'{x:.2f}' for x in per)}; goal >= {target}x) — "
              f"{'met' if met == len(per) else 'met in %d of %d' % (met, len(per))}")

    torch_key = [n for k, n in names if k == "warm" and n.startswith("torch.load")][0]
    st_keys = [n for k, n in names if k == "warm" and n.startswith("safetensors")]
    print(f"\nGoals (issue 26), shape {a.shape}, warm:")
    goal("restore_latest vs a raw sequential read of the file", SEQ, LIB, 0.8)
    goal("load-bench vs a raw sequential read of the file", SEQ, LOAD, 0.8)
    if st_keys:
        goal("restore_latest vs safetensors into existing arrays", st_keys[0], LIB, 1.5)
        goal("load-bench vs safetensors into existing arrays", st_keys[0], LOAD, 1.5)
    goal("restore_latest vs torch.load + copy_", torch_key, LIB, 3)
    goal("load-bench vs torch.load + copy_", torch_key, LOAD, 3)
    if a.cli:
        goal("`ckpt load-bench` process vs the sequential read beside it",
             "sequential read beside it (Python readinto)",
             "ckpt load-bench process (its in-process seconds)", 0.8)
    print("Context (no goal): what the bound itself allows")
    goal("raw pread N threads into the destinations vs the sequential read", SEQ,
         "raw pread, N threads", 0.8)
    goal("load-bench vs raw pread N threads into the same kind of memory", "raw pread, N threads",
         LOAD, 0.8)
    print("Goals (issue 9):")
    goal("unverified restore vs raw pread N threads, warm", "raw pread, N threads", UNV, 0.9)
    if a.cold_reps:
        goal("verified restore vs raw pread 1 thread, cold", "raw pread, 1 thread", LIB, 0.9,
             "cold")


if __name__ == "__main__":
    main()
