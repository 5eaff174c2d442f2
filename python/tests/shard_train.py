"""One rank of a small sharded training run (gloo on 127.0.0.1, torch 2.x), for test_shard.py.
Usage: shard_train.py CONFIG_JSON (env: RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT).

CONFIG: {"run": run dir, "layout": "fsdp" | "fsdp_tp" | "plain", "steps": last step,
"stop_after": step to stop right after (0: never), "save_every": k, "out": result json (rank 0
writes it), "nonblocking": true to save with blocking=False (committed by the next save or at
close), "hidden": the MLP's hidden width (default 16)}.

Tracked: model (an MLP, Linear-ReLU-Linear; "fsdp": fully_shard over every rank; "fsdp_tp": a 2
x 2 mesh ("dp", "tp"), ColwiseParallel on layer 0 (Shard(0)) and RowwiseParallel on layer 2
(Shard(1)), then fully_shard over "dp"), its AdamW with a LambdaLR, a ResumableLoader on the
"dp" mesh dimension, and with "extra" in the config: `extra` (17 rows and 3 rows, fully_shard
over every rank: uneven and empty shards) and `hsdp` (HSDP on a (rep=2, shard=world/2) mesh at 4
ranks, fully_shard over every rank below), each with its own AdamW. `plain` is a single process
with plain modules: the unsharded restore.

The result: per checkpointed step the XXH3 of the full value (full_tensor()) of every parameter
and of both Adam moments, by name; after a restore the same of the restored state ("restored");
at the end the final parameters' ("final"); with an s3:// run, what each rank's restore asked of
the store ("restore_traffic": GETs, bytes received... per rank, from ckpt._core.store_traffic)."""
import json
import os
import sys

import torch
import torch.distributed as dist
from torch import nn

import ckpt
import ckpt._core as core

torch.set_num_threads(1)


class Data(torch.utils.data.Dataset):
    def __init__(self, n=64):
        g = torch.Generator().manual_seed(3)
        self.x, self.y = torch.randn(n, 8, generator=g), torch.randn(n, 6, generator=g)

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        return self.x[i], self.y[i]


def full(t):
    return t.full_tensor() if hasattr(t, "full_tensor") else t


def digest(t):
    t = full(t.detach()).contiguous()
    return f"{t.dtype}{list(t.shape)}:" + core.xxh3_hex(t.view(torch.uint8).numpy().tobytes()
                                                          if t.numel() else b"")


def state_digests(parts):
    out = {}
    for prefix, model, opt in parts:
        for name, p in model.named_parameters():
            out[f"{prefix}.{name}"] = digest(p)
            st = opt.state.get(p, {})
            for k in ("exp_avg", "exp_avg_sq"):
                if k in st:
                    out[f"{prefix}.{name}.{k}"] = digest(st[k])
    return out


def build(layout, world, extra, hidden=16):
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, hidden), nn.ReLU(), nn.Linear(hidden, 6))
    xm = nn.Sequential(nn.Linear(4, 17), nn.Linear(17, 3)) if extra else None
    hm = nn.Sequential(nn.Linear(6, 12), nn.Linear(12, 2)) if extra else None
    mesh = None
    if layout == "fsdp_tp":
        from torch.distributed.tensor.parallel import (ColwiseParallel, RowwiseParallel,
                                                       parallelize_module)
        mesh = init_device_mesh("cpu", (world // 2, 2), mesh_dim_names=("dp", "tp"))
        parallelize_module(model, mesh["tp"], {"0": ColwiseParallel(), "2": RowwiseParallel()})
        for m in (model[0], model[2], model):
            fully_shard(m, mesh=mesh["dp"])
    elif layout == "fsdp":
        mesh = init_device_mesh("cpu", (world,), mesh_dim_names=("dp",))
        for m in (model[0], model[2], model):
            fully_shard(m, mesh=mesh)
    if extra and layout != "plain":
        flat = init_device_mesh("cpu", (world,), mesh_dim_names=("all",))
        for m in (xm[0], xm[1], xm):
            fully_shard(m, mesh=flat)
        hmesh = (init_device_mesh("cpu", (2, world // 2), mesh_dim_names=("rep", "shard"))
                 if world == 4 else flat)
        fully_shard(hm, mesh=hmesh)  # a 2-D mesh: HSDP, (Replicate(), Shard(0))
    return model, xm, hm, mesh


def main(cfg):
    layout = cfg["layout"]
    distributed = layout != "plain"
    if distributed:
        dist.init_process_group("gloo")
    rank, world = (dist.get_rank(), dist.get_world_size()) if distributed else (0, 1)
    model, xm, hm, mesh = build(layout, world, cfg.get("extra", False), cfg.get("hidden", 16))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 1.0 / (1 + s))
    parts = [("model", model, opt)]
    tracked = dict(model=model, optimizer=opt, scheduler=sched)
    if xm is not None:
        opt_x = torch.optim.AdamW(xm.parameters(), lr=1e-2)
        opt_h = torch.optim.AdamW(hm.parameters(), lr=1e-2)
        parts += [("extra", xm, opt_x), ("hsdp", hm, opt_h)]
        tracked.update(extra=xm, extra_opt=opt_x, hsdp=hm, hsdp_opt=opt_h)
    loader = (ckpt.ResumableLoader(Data(), batch_size=4, seed=1, mesh=mesh, dp_dim="dp")
              if mesh is not None else ckpt.ResumableLoader(Data(), batch_size=4, seed=1))
    tracked["loader"] = loader
    result = {"digests": {}, "world": world}
    with ckpt.Checkpointer(cfg["run"], keep_last=0) as ck:
        ck.track(**tracked)
        before = core.store_traffic()
        rep = ck.restore_latest(check_first=cfg.get("check_first", True))
        after = core.store_traffic()
        step = rep.step
        if rep.restored:
            result["restored_step"] = step
            result["restored"] = state_digests(parts)
            mine = {k: after[k] - before[k] for k in after}
            result["restore_traffic"] = [mine]
            if distributed:
                every = [None] * world
                dist.all_gather_object(every, mine)
                result["restore_traffic"] = every
        stop = cfg["stop_after"] or None
        while step < cfg["steps"] and step != stop:
            for x, y in loader:
                step += 1
                loss = nn.functional.mse_loss(model(x), y)
                if xm is not None:
                    loss = loss + xm(x[:, :4]).square().mean() + hm(y).square().mean()
                for _, _, o in parts:
                    o.zero_grad()
                loss.backward()
                for _, _, o in parts:
                    o.step()
                sched.step()
                if step % cfg["save_every"] == 0 or step == cfg["steps"]:
                    ck.save(step, blocking=not cfg.get("nonblocking", False))
                    result["digests"][str(step)] = state_digests(parts)
                if step in (stop, cfg["steps"]):
                    break
        result["final"] = state_digests(parts)
        result["step"] = step
    if rank == 0:
        with open(cfg["out"], "w") as f:
            json.dump(result, f)
    if distributed:
        dist.destroy_process_group()


if __name__ == "__main__":
    with open(sys.argv[1]) as f:
        main(json.load(f))
    sys.stdout.flush()
    os._exit(0)  # gloo's threads can hold a clean exit for seconds
