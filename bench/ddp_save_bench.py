"""DDP state written once: ckpt per rank vs ckpt with the model replicated, against rank 0's
torch.save and dcp.save, on the same DDP state (issue 22, "Replicated tensors ... written once").

    PYTHONPATH=build/python build/python/torch2-venv/bin/python bench/ddp_save_bench.py \
        [--mb 512] [--reps 3] [--dir /tmp/ckpt-ddp-bench]

An MLP of square Linear layers under DistributedDataParallel with AdamW after one step
(parameters plus both moments: --mb MiB of float32) over 2 gloo ranks on 127.0.0.1. In the same
processes, interleaved rep by rep (the order reversed every other rep), blocking saves:
- ckpt_per_rank: ck.track(model=ddp.module, ...): every rank writes a whole copy;
- ckpt_once: the same with Checkpointer(replicated=("model",)): one rank writes each tensor;
- torch_save_rank0: the DDP recipe, rank 0 torch.save()s {model, optimizer} and fsyncs, then a
  barrier;
- dcp_save: dcp.save of get_state_dict(model, opt) (DCP writes replicated tensors once too).
Then restores at 2 ranks, interleaved: ckpt restore_latest of each ckpt checkpoint (every
tensor's hash checked first; for the replicated one also check_first=False: hashed as the bytes
land in the live tensors), torch.load of rank 0's file on every rank + load_state_dict, dcp.load
(which checks nothing). Times are the slowest rank's, between barriers; bytes are the files
each save left. Prints medians, ranges and ratios (peer / ckpt_once: above 1 is ckpt faster)."""
import argparse
import json
import os
import pathlib
import shutil
import statistics
import sys
import time

HERE = pathlib.Path(__file__).resolve()
sys.path.insert(0, str(HERE.parent))
from shard_bench import launch, show  # noqa: E402  (the same launcher and printing)

SAVES = ("ckpt_per_rank", "ckpt_once", "torch_save_rank0", "dcp_save")
LOADS = ("ckpt_per_rank_load", "ckpt_once_load", "ckpt_once_in_place_load", "torch_load",
         "dcp_load")


def build(mb):
    import torch
    from torch import nn
    width, layers = 1024, max(1, round(mb * (1 << 20) / 3 / 4 / (1024 * 1024)))
    torch.manual_seed(0)
    model = nn.parallel.DistributedDataParallel(
        nn.Sequential(*[nn.Linear(width, width, bias=False) for _ in range(layers)]))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    model(torch.randn(2, width)).sum().backward()
    opt.step()
    opt.zero_grad()
    return model, opt


def dir_bytes(path):
    return sum(p.stat().st_size for p in pathlib.Path(path).rglob("*") if p.is_file())


def rank_main(cfg):
    import torch
    import torch.distributed as dist
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict
    import ckpt
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    rank, barrier = dist.get_rank(), dist.barrier
    model, opt = build(cfg["mb"])
    root = pathlib.Path(cfg["dir"])
    times, sizes = {}, {}

    def timed(fn):
        barrier()
        t0 = time.perf_counter()
        fn()
        t = torch.tensor([time.perf_counter() - t0], dtype=torch.float64)
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        return float(t)

    def torch_save(path):
        if rank == 0:
            with open(path, "wb") as f:
                torch.save({"model": model.module.state_dict(),
                            "optimizer": opt.state_dict()}, f)
                f.flush()
                os.fsync(f.fileno())
        barrier()

    if rank == 0:
        for name in SAVES:
            shutil.rmtree(root / name, ignore_errors=True)
            (root / name).mkdir(parents=True)
    barrier()
    cks = {name: ckpt.Checkpointer(root / name, keep_last=1,
                                   replicated=("model",) if name == "ckpt_once" else ())
           .track(model=model.module, optimizer=opt) for name in SAVES[:2]}
    for rep in range(cfg["reps"]):
        order = list(SAVES) if rep % 2 == 0 else list(reversed(SAVES))
        for name in order:
            if name in cks:
                t = timed(lambda: cks[name].save(rep + 1))
            elif name == "torch_save_rank0":
                t = timed(lambda: torch_save(root / name / "state.pt"))
            else:
                out = root / name / f"rep-{rep}"
                if rank == 0:
                    shutil.rmtree(out, ignore_errors=True)
                barrier()
                msd, osd = get_state_dict(model, opt)
                t = timed(lambda: dcp.save({"model": msd, "optim": osd}, checkpoint_id=str(out)))
            times.setdefault(name, []).append(t)
            barrier()
            if rank == 0:
                path = root / name / (f"rep-{rep}" if name == "dcp_save" else "")
                sizes[name] = dir_bytes(path) - (dir_bytes(root / name / "LOCK")
                                                 if name in cks else 0)
    for ck in cks.values():
        ck.close()
    barrier()
    for rep in range(cfg["reps"]):
        order = list(LOADS) if rep % 2 == 0 else list(reversed(LOADS))
        for name in order:
            if name.startswith("ckpt"):
                saved = "ckpt_once" if name.startswith("ckpt_once") else "ckpt_per_rank"
                with ckpt.Checkpointer(root / saved, read_only=True) as ck:
                    ck.track(model=model.module, optimizer=opt)
                    first = "in_place" not in name
                    t = timed(lambda: ck.restore_latest(check_first=first))
            elif name == "torch_load":
                def load():
                    state = torch.load(root / "torch_save_rank0" / "state.pt")
                    model.module.load_state_dict(state["model"])
                    opt.load_state_dict(state["optimizer"])
                t = timed(load)
            else:
                msd, osd = get_state_dict(model, opt)
                state = {"model": msd, "optim": osd}

                def load():
                    dcp.load(state, checkpoint_id=str(root / "dcp_save" / "rep-0"))
                    set_state_dict(model, opt, model_state_dict=state["model"],
                                   optim_state_dict=state["optim"])
                t = timed(load)
            times.setdefault(name, []).append(t)
    if rank == 0:
        with open(cfg["out"], "w") as f:
            json.dump({"times": times, "bytes": sizes}, f)
    dist.destroy_process_group()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mb", type=float, default=512, help="MiB of parameters + moments")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--dir", default="/tmp/ckpt-ddp-bench")
    ap.add_argument("--rank-config", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.rank_config:
        rank_main(json.loads(a.rank_config))
        sys.stdout.flush()
        os._exit(0)  # a gloo thread freeing tensors during finalization aborts
    root = pathlib.Path(a.dir)
    root.mkdir(parents=True, exist_ok=True)
    cfg = {"mb": a.mb, "reps": a.reps, "dir": str(root), "out": str(root / "result.json")}
    print(f"ddp_save_bench: DDP MLP + AdamW, {a.mb:g} MiB of state on each of 2 gloo ranks, "
          f"{a.reps} reps, interleaved")
    got = launch(2, cfg, sys.executable, HERE)
    times, sizes = got["times"], got["bytes"]
    once = statistics.median(times["ckpt_once"])
    for name in SAVES:
        ratio = statistics.median(times[name]) / once
        print(f"{show(name, times[name])}  {sizes[name] / 2**20:8.1f} MiB written  "
              f"{ratio:5.2f}x ckpt_once's time")
    once = statistics.median(times["ckpt_once_load"])
    for name in LOADS:
        ratio = statistics.median(times[name]) / once
        print(f"{show(name, times[name])}  {ratio:5.2f}x ckpt_once_load's time")


if __name__ == "__main__":
    main()
