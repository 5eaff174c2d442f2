#!/usr/bin/python3
"""ckpt's Python save against torch.save + fsync of the same model + AdamW state, same process.

Builds an MLP of --dim x --dim Linear layers sized so that parameters + AdamW moments come to
about --mb MB (default ~1 GB), takes one optimizer step so the moments exist, then for --reps
rounds (median printed, every round listed):
  torch.save + fsync   torch.save({"model": sd, "optimizer": opt_sd}, f); f.flush(); os.fsync;
                       then os.unlink of the previous round's file, as ckpt's keep_last=1
                       retention deletes the previous checkpoint inside its save
  ckpt blocking        Checkpointer.save(step): written, hashed, fsynced, committed, retention
  ckpt stall           Checkpointer.save(step, blocking=False): what the training loop waits
                       (state-dict walk + one copy into the reused snapshot arena)
  ckpt total           from that call to wait() returning: committed in the background
An optimizer step runs between rounds (the state changes, as in training). The first
non-blocking save also allocates the arena; it is listed apart and left out of the median.
Ratios: torch.save+fsync / ckpt stall (DESIGN.md goal: >= 10x) and torch.save+fsync / ckpt
blocking (goal: >= 1, not slower).
Then restore, --reps rounds each, warm (both files read through the page cache first: ckpt
writes its tensor bodies with O_DIRECT, so its file is not cached after the save) and cold
(page cache dropped before each run, as root; skipped otherwise):
  torch.load + load_state_dict   the model's and AdamW's, from the torch.save file
  ckpt restore_latest            a fresh Checkpointer over the same live objects: read in
                                 place, every tensor hash and the whole-file hash checked
Ratio: torch.load+load_state_dict / ckpt restore (issue goal: >= 3x, warm).

  PYTHONPATH=build/python /usr/bin/python3 bench/python_save_bench.py [--mb 1024] [--reps 3]

--dcp (torch >= 2.3): then, on the same model + AdamW, ckpt against torch.distributed.checkpoint in
the same process, interleaved (dcp_case): blocking save vs dcp.save, non-blocking stall vs
dcp.async_save's, warm restore vs dcp.load + set_state_dict.

  PYTHONPATH=build/python build/python/torch2-venv/bin/python bench/python_save_bench.py --dcp

--small: instead, a small state, where the fixed costs (file creation, fsyncs, manifest, commit)
dominate: a GPT-2-shaped model (token and position embeddings, --layers blocks of 2 LayerNorms,
attention c_attn/c_proj and MLP c_fc/c_proj with biases, a final LayerNorm; --width 64,
--vocab 1000: 3.3 MB with AdamW's moments and step tensors, 208 tensors). Five rounds
(--reps), interleaved in one process: torch.save + fsync, ckpt blocking, and the stall of a
non-blocking save of a Checkpointer made for that round (its first save: the arena is allocated
there) followed by a second one (the steady stall); the very first non-blocking save of the
process is listed apart. Printed: each round, median, spread (min-max), the blocking save's
breakdown (write_rank's phases from save()'s "seconds", and the rest: capture, commit,
retention, journal) and the ratios
torch.save+fsync / ckpt blocking (goal >= 1x) and first stall / steady stall (goal <= 2x).

  PYTHONPATH=build/python /usr/bin/python3 bench/python_save_bench.py --small [--reps 5]
"""
import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time

import torch
from torch import nn

import ckpt


def build(mb, dim):
    per_layer = (dim * dim + dim) * 4 * 3  # weights + bias, and AdamW's two moments
    layers = max(1, round(mb * 1e6 / per_layer))
    model = nn.Sequential(*[nn.Linear(dim, dim) for _ in range(layers)])
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    return model, opt


def train_step(model, opt, dim):
    loss = model(torch.randn(2, dim)).pow(2).mean()
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()


def torch_save(model, opt, path, previous=None):
    t0 = time.perf_counter()
    with open(path, "wb") as f:
        torch.save({"model": model.state_dict(), "optimizer": opt.state_dict()}, f)
        f.flush()
        os.fsync(f.fileno())
    if previous is not None:
        os.unlink(previous)
    return time.perf_counter() - t0


def files_of(path):
    if os.path.isfile(path):
        return [path]
    return [os.path.join(d, f) for d, _, fs in os.walk(path) for f in fs]


def make_warm(path):
    for name in files_of(path):
        with open(name, "rb") as f:
            while f.read(8 << 20):
                pass


def make_cold():
    os.sync()
    try:
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
        return True
    except OSError:
        return False


class TinyGPT2(nn.Module):
    """GPT-2's parameter layout (transformers' names and shapes, Linear for Conv1D), no forward
    pass beyond what makes AdamW's state exist."""

    def __init__(self, vocab, width, layers, ctx=128):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(vocab, width), nn.Embedding(ctx, width)
        self.h = nn.ModuleList()
        for _ in range(layers):
            b = nn.Module()
            b.ln_1, b.ln_2 = nn.LayerNorm(width), nn.LayerNorm(width)
            b.c_attn, b.attn_proj = nn.Linear(width, 3 * width), nn.Linear(width, width)
            b.c_fc, b.mlp_proj = nn.Linear(width, 4 * width), nn.Linear(4 * width, width)
            self.h.append(b)
        self.ln_f = nn.LayerNorm(width)

    def forward(self, ids):
        x = self.wte(ids) + self.wpe(torch.arange(ids.shape[1]))
        for b in self.h:
            a = b.c_attn(b.ln_1(x))[..., :x.shape[-1]]
            x = x + b.attn_proj(a)
            x = x + b.mlp_proj(torch.relu(b.c_fc(b.ln_2(x))))
        return self.ln_f(x)


def small_case(a, base):
    torch.manual_seed(0)
    model = TinyGPT2(a.vocab, a.width, a.layers)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)

    def step_once():
        loss = model(torch.randint(0, a.vocab, (2, 16))).pow(2).mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    step_once()
    sd = list(model.state_dict().values()) + [t for st in opt.state.values()
                                              for t in st.values() if torch.is_tensor(t)]
    nbytes = sum(t.numel() * t.element_size() for t in sd)
    print(f"python_save_bench --small: torch {torch.__version__}, GPT-2-shaped "
          f"(vocab {a.vocab}, width {a.width}, {a.layers} blocks) + AdamW: {len(sd)} tensors, "
          f"{nbytes / 1e6:.2f} MB, {a.reps} interleaved rounds, dir {base}")
    print(f"load average at start: {os.getloadavg()[0]:.2f} ({os.cpu_count()} cores)")
    t_torch, t_block, t_first, t_steady = [], [], [], []
    phases = {}  # write_rank's own breakdown of each blocking save (save()'s "seconds")
    process_first = None
    step = 0
    for r in range(a.reps + 1):  # round 0 warms up (imports, first file system touches)
        step_once()
        cur = os.path.join(base, f"torch-{r}.pt")
        prev = os.path.join(base, f"torch-{r - 1}.pt") if r > 0 else None
        tt = torch_save(model, opt, cur, prev)
        with ckpt.Checkpointer(os.path.join(base, "block"), keep_last=1) as ck:
            ck.track(model=model, optimizer=opt)
            step += 1
            t0 = time.perf_counter()
            info = ck.save(step)
            tb = time.perf_counter() - t0
        with ckpt.Checkpointer(os.path.join(base, "async"), keep_last=1) as ck:
            ck.track(model=model, optimizer=opt)
            stalls = []
            for _ in range(2):
                step_once()
                step += 1
                t0 = time.perf_counter()
                ck.save(step, blocking=False)
                stalls.append(time.perf_counter() - t0)
                ck.wait()
        if r == 0:
            process_first = stalls[0]
            continue
        t_torch.append(tt)
        t_block.append(tb)
        for k, v in info["seconds"].items():
            phases.setdefault(k, []).append(v)
        t_first.append(stalls[0])
        t_steady.append(stalls[1])
    med = statistics.median

    def row(label, xs):
        print(f"  {label:48s} {med(xs) * 1e3:7.2f} ms  spread {min(xs) * 1e3:.2f}-"
              f"{max(xs) * 1e3:.2f}  ({', '.join(f'{x * 1e3:.2f}' for x in xs)})")

    row("torch.save + fsync", t_torch)
    row("ckpt blocking save", t_block)
    for k, v in phases.items():
        row(f"  of which write_rank {k}", v)
    row("  the rest (commit, retention, journal, capture)",
        [b - sum(p[i] for p in phases.values()) for i, b in enumerate(t_block)])
    row("ckpt first non-blocking stall", t_first)
    row("ckpt steady non-blocking stall", t_steady)
    print(f"  the process's first non-blocking stall: {process_first * 1e3:.2f} ms")
    ratios = [t / b for t, b in zip(t_torch, t_block)]
    print(f"  torch.save+fsync / ckpt blocking: {med(ratios):.2f}x (per round "
          f"{min(ratios):.2f}-{max(ratios):.2f})  (goal >= 1x)")
    ratios = [f / s for f, s in zip(t_first, t_steady)]
    print(f"  first stall / steady stall:       {med(ratios):.2f}x (per round "
          f"{min(ratios):.2f}-{max(ratios):.2f}; the process's first: "
          f"{process_first / med(t_steady):.2f}x)  (goal <= 2x)")
    return 0


def memcpy_peer(model, opt):
    """The floor of a snapshot: one copy of every tensor into preallocated memory (torch's
    copy_, the same bytes)."""
    ts = list(model.state_dict().values()) + [t for s in opt.state.values() for t in s.values()
                                              if isinstance(t, torch.Tensor)]
    dst = [torch.empty_like(t) for t in ts]
    for d, t in zip(dst, ts):  # fault the pages in first, as the reused arena is
        d.copy_(t)
    t0 = time.perf_counter()
    for d, t in zip(dst, ts):
        d.copy_(t)
    return time.perf_counter() - t0


def torch_restore(model, opt, path):
    t0 = time.perf_counter()
    sd = torch.load(path)
    model.load_state_dict(sd["model"])
    opt.load_state_dict(sd["optimizer"])
    return time.perf_counter() - t0


def ckpt_restore(model, opt, run):
    t0 = time.perf_counter()
    with ckpt.Checkpointer(run, keep_last=1) as ck:
        ck.track(model=model, optimizer=opt)
        rep = ck.restore_latest()
    assert rep.restored, rep
    return time.perf_counter() - t0


def dcp_case(a, base, model, opt):
    """ckpt against torch.distributed.checkpoint in one process (no process group; torch >= 2.2),
    interleaved rep by rep on the same model + AdamW: blocking save vs dcp.save (FileSystemWriter
    fsyncs its files), the non-blocking stall vs dcp.async_save's (the call's return), and a warm
    restore into the live model and optimizer (ckpt restore_latest, every hash checked first, vs
    dcp.load of get_state_dict's dicts + set_state_dict; DCP checks nothing)."""
    try:
        import torch.distributed.checkpoint as dcp
        from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict
        dcp.async_save  # noqa: B018 (torch >= 2.3)
    except (ImportError, AttributeError) as e:
        print(f"  --dcp: skipped: this torch ({torch.__version__}) lacks what it needs ({e})")
        return
    import warnings
    warnings.filterwarnings("ignore", message=".*torch.distributed is disabled.*")
    run = os.path.join(base, "dcp-run")
    rows = {k: [] for k in ("ckpt save", "dcp.save", "ckpt stall", "dcp.async_save stall",
                            "ckpt restore", "dcp.load")}
    step = 10_000
    with ckpt.Checkpointer(run, keep_last=1) as ck:
        ck.track(model=model, optimizer=opt)
        ck.save(step, blocking=False)  # the arena, allocated outside the clock
        ck.wait()
        for r in range(a.reps):
            train_step(model, opt, a.dim)
            msd, osd = get_state_dict(model, opt)
            target = os.path.join(base, f"dcp-{r}")
            t0 = time.perf_counter()
            dcp.save({"model": msd, "optim": osd}, checkpoint_id=target)
            rows["dcp.save"].append(time.perf_counter() - t0)
            step += 1
            t0 = time.perf_counter()
            ck.save(step)
            rows["ckpt save"].append(time.perf_counter() - t0)
            train_step(model, opt, a.dim)
            msd, osd = get_state_dict(model, opt)
            t0 = time.perf_counter()
            fut = dcp.async_save({"model": msd, "optim": osd}, checkpoint_id=target + "-async")
            rows["dcp.async_save stall"].append(time.perf_counter() - t0)
            fut.result()
            step += 1
            t0 = time.perf_counter()
            ck.save(step, blocking=False)
            rows["ckpt stall"].append(time.perf_counter() - t0)
            ck.wait()
            make_warm(target + "-async")
            msd, osd = get_state_dict(model, opt)
            t0 = time.perf_counter()
            dcp.load({"model": msd, "optim": osd}, checkpoint_id=target + "-async")
            set_state_dict(model, opt, model_state_dict=msd, optim_state_dict=osd)
            rows["dcp.load"].append(time.perf_counter() - t0)
            make_warm(run)
            rows["ckpt restore"].append(ckpt_restore(model, opt, run))
            for d in (target, target + "-async"):
                shutil.rmtree(d, ignore_errors=True)
    med = statistics.median
    print(f"  against torch.distributed.checkpoint, one process, {a.reps} interleaved reps:")
    for k, xs in rows.items():
        print(f"    {k:22s} {med(xs):7.3f} s  ({', '.join(f'{x:.3f}' for x in xs)})")
    for ours, theirs, what in (("ckpt save", "dcp.save", "blocking save"),
                               ("ckpt stall", "dcp.async_save stall", "non-blocking stall"),
                               ("ckpt restore", "dcp.load", "warm restore")):
        per = [t / o for o, t in zip(rows[ours], rows[theirs])]
        print(f"    {what}: DCP / ckpt {med(rows[theirs]) / med(rows[ours]):5.2f}x "
              f"(per rep {min(per):.2f}-{max(per):.2f})")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", type=float, default=1024, help="model + AdamW state size, MB")
    ap.add_argument("--dim", type=int, default=2048)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--dir", default="", help="where to write (default: a temp dir under /tmp)")
    ap.add_argument("--small", action="store_true", help="the small-state case (see the top)")
    ap.add_argument("--vocab", type=int, default=1000)
    ap.add_argument("--width", type=int, default=64)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--dcp", action="store_true",
                    help="also against torch.distributed.checkpoint (torch >= 2.3; see dcp_case)")
    a = ap.parse_args()
    base = a.dir or tempfile.mkdtemp(prefix="ckpt-pysave-")
    os.makedirs(base, exist_ok=True)
    if a.small:
        if "--reps" not in sys.argv:
            a.reps = 5
        rc = small_case(a, base)
        if not a.dir:
            shutil.rmtree(base, ignore_errors=True)
        return rc
    torch.manual_seed(0)
    model, opt = build(a.mb, a.dim)
    train_step(model, opt, a.dim)
    nbytes = sum(t.numel() * t.element_size() for t in model.state_dict().values())
    nbytes += sum(t.numel() * t.element_size() for s in opt.state.values() for t in s.values()
                  if isinstance(t, torch.Tensor))
    print(f"python_save_bench: torch {torch.__version__}, {len(model)} Linear({a.dim}, {a.dim}) "
          f"+ AdamW, {nbytes / 1e6:.0f} MB of tensors, {a.reps} reps, dir {base}")
    print(f"load average at start: {os.getloadavg()[0]:.2f} ({os.cpu_count()} cores)")
    t_torch, t_block, t_stall, t_total, t_snap, t_copy = [], [], [], [], [], []
    first = None
    run = os.path.join(base, "run")
    step = 0
    with ckpt.Checkpointer(run, keep_last=1) as ck:
        ck.track(model=model, optimizer=opt)
        for r in range(a.reps + 1):  # round 0 allocates the arena
            train_step(model, opt, a.dim)
            cur = os.path.join(base, f"torch-{r}.pt")
            prev = os.path.join(base, f"torch-{r - 1}.pt") if r > 0 else None
            t_torch.append(torch_save(model, opt, cur, prev))
            step += 1
            t0 = time.perf_counter()
            ck.save(step)
            t_block.append(time.perf_counter() - t0)
            train_step(model, opt, a.dim)
            step += 1
            t0 = time.perf_counter()
            info = ck.save(step, blocking=False)
            stall = time.perf_counter() - t0
            ck.wait()
            total = time.perf_counter() - t0
            if r == 0:
                first = stall
            else:
                t_stall.append(stall)
                t_total.append(total)
                t_snap.append(info["snapshot_seconds"])
                t_copy.append(memcpy_peer(model, opt))
        stats = ck.background_stats()
    torch_file = os.path.join(base, "torch.pt")
    torch_save(model, opt, torch_file, os.path.join(base, f"torch-{a.reps}.pt"))
    t_tload, t_cload, c_tload, c_cload = [], [], [], []
    for _ in range(a.reps):
        make_warm(torch_file)
        t_tload.append(torch_restore(model, opt, torch_file))
        make_warm(run)
        t_cload.append(ckpt_restore(model, opt, run))
    cold = make_cold()
    for _ in range(a.reps if cold else 0):
        make_cold()
        c_tload.append(torch_restore(model, opt, torch_file))
        make_cold()
        c_cload.append(ckpt_restore(model, opt, run))
    os.unlink(torch_file)
    t_torch, t_block = t_torch[1:], t_block[1:]
    med = statistics.median
    fmt = lambda xs: ", ".join(f"{x:.3f}" for x in xs)
    print(f"  torch.save + fsync       {med(t_torch):7.3f} s  ({fmt(t_torch)})")
    print(f"  ckpt blocking save       {med(t_block):7.3f} s  ({fmt(t_block)})")
    print(f"  ckpt non-blocking stall  {med(t_stall):7.3f} s  ({fmt(t_stall)}; first save, "
          f"arena allocated: {first:.3f} s)")
    print(f"    of which the copy      {med(t_snap):7.3f} s  ({fmt(t_snap)}; the rest is the "
          f"state_dict walk)")
    print(f"  peer: torch copy_ of the same tensors into allocated memory {med(t_copy):.3f} s "
          f"({fmt(t_copy)})")
    print(f"  ckpt non-blocking total  {med(t_total):7.3f} s  ({fmt(t_total)})")
    print(f"  torch.save+fsync / ckpt stall:    {med(t_torch) / med(t_stall):5.1f}x  (goal >= 10x)")
    print(f"  torch.save+fsync / ckpt blocking: {med(t_torch) / med(t_block):5.2f}x  (goal >= 1x)")
    print(f"  warm: torch.load + load_state_dict {med(t_tload):7.3f} s  ({fmt(t_tload)})")
    print(f"  warm: ckpt restore_latest          {med(t_cload):7.3f} s  ({fmt(t_cload)})")
    print(f"  warm: torch.load+load_state_dict / ckpt restore: "
          f"{med(t_tload) / med(t_cload):5.2f}x  (goal >= 3x)")
    if c_tload:
        print(f"  cold: torch.load + load_state_dict {med(c_tload):7.3f} s  ({fmt(c_tload)})")
        print(f"  cold: ckpt restore_latest          {med(c_cload):7.3f} s  ({fmt(c_cload)})")
        print(f"  cold: torch.load+load_state_dict / ckpt restore: "
              f"{med(c_tload) / med(c_cload):5.2f}x")
    else:
        print("  cold: skipped (dropping the page cache needs root)")
    print(f"  arena: {stats['arena_capacity'] / 1e6:.0f} MB, allocated "
          f"{stats['arena_allocations']} time(s) over {stats['submitted']} saves")
    if a.dcp:
        dcp_case(a, base, model, opt)
    if not a.dir:
        shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
