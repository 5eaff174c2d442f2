"""ckpt against torch.distributed.checkpoint (DCP) on the same FSDP2 state (issue 22).

    PYTHONPATH=build/python build/python/torch2-venv/bin/python bench/shard_bench.py \
        [--mb 1024] [--width 1024] [--reps 3] [--worlds 2,1,3] [--dir /tmp/shard-bench]

An MLP of square Linear layers under FSDP2 fully_shard with AdamW after one step (parameters
plus both moments: --mb MiB of float32 in all) over 2 gloo ranks on 127.0.0.1. In the same
processes, interleaved rep by rep: ckpt blocking save (ck.save(step): written, fsynced,
committed) vs dcp.save; ckpt non-blocking save's stall (ck.save(step, blocking=False) until it
returns) vs dcp.async_save's (until its future is handed back). Then restores of the ckpt and
the DCP checkpoints at each of --worlds ranks (fresh processes), interleaved: ckpt restore_latest
(every box hash-checked, into a fresh optimizer; into the optimizer with state, check first and
in place: check_first=False) vs dcp.load (into a model and optimizer whose state exists; DCP
checks nothing; state dicts taken and applied outside the clock), vs dcp.load as PyTorch's DCP
recipe and torchtitan call it (into the same state: Stateful entries whose get_*_state_dict and
set_*_state_dict dcp.load calls inside the clock), and vs a DCP restore after a restart as
torchtitan does it (a fresh optimizer: get_state_dict, which allocates its state, + dcp.load +
set_state_dict, timed whole). Times are
the slowest rank's, between barriers. Prints medians, ranges and ratios (DCP / ckpt: above 1 is
ckpt faster)."""
import argparse
import json
import os
import pathlib
import shutil
import socket
import statistics
import subprocess
import sys
import time

HERE = pathlib.Path(__file__).resolve()


def build(mb, world, width=1024):
    import torch
    from torch import nn
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard
    # parameters are a third of the state (AdamW keeps two moments)
    # --width 128: many small tensors (64 KiB each) instead of a few 4 MiB ones
    layers = max(1, round(mb * (1 << 20) / 3 / 4 / (width * width)))
    torch.manual_seed(0)
    model = nn.Sequential(*[nn.Linear(width, width, bias=False) for _ in range(layers)])
    if world > 1:
        mesh = init_device_mesh("cpu", (world,))
        for m in list(model) + [model]:
            fully_shard(m, mesh=mesh)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    return model, opt


def step(model, opt):
    import torch
    model(torch.randn(2, model[0].in_features)).sum().backward()
    opt.step()
    opt.zero_grad()


class _ModelState:
    """The model as a torch.distributed.checkpoint Stateful, as torchtitan's ModelWrapper."""

    def __init__(self, model):
        self.model = model

    def state_dict(self):
        from torch.distributed.checkpoint.state_dict import get_model_state_dict
        return get_model_state_dict(self.model)

    def load_state_dict(self, sd):
        from torch.distributed.checkpoint.state_dict import set_model_state_dict
        set_model_state_dict(self.model, sd)


class _OptimState:
    """The optimizer as a Stateful, as torchtitan's OptimizersContainer."""

    def __init__(self, model, opt):
        self.model, self.opt = model, opt

    def state_dict(self):
        from torch.distributed.checkpoint.state_dict import get_optimizer_state_dict
        return get_optimizer_state_dict(self.model, self.opt)

    def load_state_dict(self, sd):
        from torch.distributed.checkpoint.state_dict import set_optimizer_state_dict
        set_optimizer_state_dict(self.model, self.opt, sd)


def timed(fn, barrier):
    barrier()
    t0 = time.perf_counter()
    out = fn()
    t1 = time.perf_counter()
    barrier()
    return t1 - t0, out


def rank_main(cfg):
    import torch
    import torch.distributed as dist
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict
    import ckpt
    torch.set_num_threads(1)
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world > 1:
        dist.init_process_group("gloo")
        barrier = dist.barrier
    else:
        def barrier():
            return None
    rank = dist.get_rank() if world > 1 else 0
    model, opt = build(cfg["mb"], world, cfg.get("width", 1024))
    times = {}

    def put(name, seconds):
        t = torch.tensor([seconds], dtype=torch.float64)
        if world > 1:
            dist.all_reduce(t, op=dist.ReduceOp.MAX)
        times.setdefault(name, []).append(float(t))

    root = pathlib.Path(cfg["dir"])
    if cfg["phase"] == "save":
        step(model, opt)
        cks = {}
        for op in ("ckpt_save", "ckpt_stall"):  # one each for every rep: its arena is reused
            if rank == 0:
                shutil.rmtree(root / op, ignore_errors=True)
            barrier()
            cks[op] = ckpt.Checkpointer(root / op, keep_last=1).track(model=model, optimizer=opt)
        for rep in range(cfg["reps"]):
            order = ["ckpt_save", "dcp_save", "ckpt_stall", "dcp_async_stall"]
            if rep % 2:
                order.reverse()
            for op in order:
                run = root / f"{op}-{rep}"
                if rank == 0:
                    shutil.rmtree(run, ignore_errors=True)
                barrier()
                if op.startswith("ckpt"):
                    ck = cks[op]
                    s, _ = timed(lambda: ck.save(rep + 1, blocking=(op == "ckpt_save")), barrier)
                    ck.wait()
                else:
                    msd, osd = get_state_dict(model, opt)
                    state = {"model": msd, "optim": osd}
                    if op == "dcp_save":
                        s, _ = timed(lambda: dcp.save(state, checkpoint_id=str(run)), barrier)
                    else:
                        s, fut = timed(lambda: dcp.async_save(state, checkpoint_id=str(run)),
                                       barrier)
                        fut.result()
                put(op, s)
                barrier()
        for ck in cks.values():
            ck.close()
        barrier()
        if rank == 0:  # the checkpoints the restores read
            for a, b in (("ckpt_save", "ckpt"), ("dcp_save-0", "dcp")):
                shutil.rmtree(root / b, ignore_errors=True)
                os.rename(root / a, root / b)
    else:
        step(model, opt)  # the live optimizer has state (DCP needs it; ckpt_load_live uses it)
        for rep in range(cfg["reps"]):
            order = ["ckpt_load", "ckpt_load_live", "ckpt_load_in_place", "dcp_load",
                     "dcp_load_stateful", "dcp_load_fresh"]
            if rep % 2:
                order.reverse()
            for op in order:
                if op.startswith("ckpt"):
                    target = (torch.optim.AdamW(model.parameters(), lr=1e-3)
                              if op == "ckpt_load" else opt)
                    check_first = op != "ckpt_load_in_place"
                    with ckpt.Checkpointer(root / "ckpt", read_only=True) as ck:
                        ck.track(model=model, optimizer=target)
                        s, rep_ = timed(lambda: ck.restore_latest(check_first=check_first),
                                        barrier)
                        assert rep_.restored
                elif op == "dcp_load":
                    msd, osd = get_state_dict(model, opt)
                    state = {"model": msd, "optim": osd}
                    s, _ = timed(lambda: dcp.load(state, checkpoint_id=str(root / "dcp")),
                                 barrier)
                    set_state_dict(model, opt, model_state_dict=state["model"],
                                   optim_state_dict=state["optim"])
                elif op == "dcp_load_stateful":
                    # as PyTorch's DCP recipe and torchtitan call it: Stateful entries, whose
                    # state_dict() (get_*_state_dict) and load_state_dict() (set_*_state_dict)
                    # dcp.load calls itself, around the read
                    app = {"model": _ModelState(model), "optim": _OptimState(model, opt)}
                    s, _ = timed(lambda: dcp.load(app, checkpoint_id=str(root / "dcp")),
                                 barrier)
                else:  # after a restart, as torchtitan restores: the whole call sequence
                    fresh = torch.optim.AdamW(model.parameters(), lr=1e-3)

                    def restart(fresh=fresh):
                        msd, osd = get_state_dict(model, fresh)  # allocates fresh's state
                        state = {"model": msd, "optim": osd}
                        dcp.load(state, checkpoint_id=str(root / "dcp"))
                        set_state_dict(model, fresh, model_state_dict=state["model"],
                                       optim_state_dict=state["optim"])
                    s, _ = timed(restart, barrier)
                put(op, s)
    if rank == 0:
        with open(cfg["out"], "w") as f:
            json.dump(times, f)
    if world > 1:
        dist.destroy_process_group()


def launch(world, cfg, python, script=HERE):
    """Runs `script --rank-config CFG` as `world` gloo ranks on 127.0.0.1; rank 0's JSON."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    procs = []
    for r in range(world):
        env = dict(os.environ, RANK=str(r), WORLD_SIZE=str(world), MASTER_ADDR="127.0.0.1",
                   MASTER_PORT=str(port), OMP_NUM_THREADS="1", PYTHONWARNINGS="ignore")
        procs.append(subprocess.Popen([python, str(script), "--rank-config", json.dumps(cfg)],
                                      env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                      text=True))
    for p in procs:
        out, _ = p.communicate()
        if p.returncode != 0:
            sys.exit(f"{pathlib.Path(script).stem}: a rank failed:\n{out}")
    with open(cfg["out"]) as f:
        return json.load(f)


def show(name, xs):
    return (f"{name:<22} median {statistics.median(xs):7.3f} s  range "
            f"{min(xs):7.3f} - {max(xs):7.3f} s  (n={len(xs)})")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mb", type=float, default=256, help="MiB of parameters + moments")
    ap.add_argument("--width", type=int, default=1024,
                    help="the square Linear layers' width (128: many small tensors)")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--worlds", default="2,1,3", help="restore world sizes")
    ap.add_argument("--dir", default="/tmp/ckpt-shard-bench",
                    help="where the checkpoints go (about 12x --mb of them); removed at the end")
    ap.add_argument("--keep", action="store_true", help="leave --dir's checkpoints behind")
    ap.add_argument("--rank-config", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.rank_config:
        rank_main(json.loads(a.rank_config))
        sys.stdout.flush()
        os._exit(0)  # a gloo thread freeing tensors during finalization aborts
    root = pathlib.Path(a.dir)
    root.mkdir(parents=True, exist_ok=True)
    # What the machine wrote before (a build: hundreds of MB of objects) reaches the disk now,
    # not inside the first saves' timings (the first run after a build put ckpt's save at 1.46x
    # dcp.save's, the next two at 1.88x and 2.05x).
    os.sync()
    try:
        compare(a, root)
    finally:
        if not a.keep:
            shutil.rmtree(root, ignore_errors=True)


def compare(a, root):
    """The save phase at 2 ranks, then a restore phase at each of --worlds; prints the rows."""
    base = {"mb": a.mb, "width": a.width, "reps": a.reps, "dir": str(root)}
    print(f"shard_bench: FSDP2 MLP + AdamW, {a.mb:g} MiB of state over 2 gloo ranks, "
          f"{a.reps} reps, interleaved")
    saves = launch(2, dict(base, phase="save", out=str(root / "save.json")), sys.executable)
    for ours, theirs in (("ckpt_save", "dcp_save"), ("ckpt_stall", "dcp_async_stall")):
        print(show(ours, saves[ours]))
        print(show(theirs, saves[theirs]))
        print(f"{'':<22} ratio {theirs}/{ours}: "
              f"{statistics.median(saves[theirs]) / statistics.median(saves[ours]):.2f}x")
    for w in (int(x) for x in a.worlds.split(",")):
        got = launch(w, dict(base, phase="load", out=str(root / f"load{w}.json")), sys.executable)
        print(show(f"ckpt restore at {w}", got["ckpt_load"]) + "  fresh optimizer")
        print(show(f"ckpt restore at {w}", got["ckpt_load_live"]) + "  optimizer with state")
        print(show(f"dcp.load at {w}", got["dcp_load"]) + "  optimizer with state")
        print(show(f"dcp.load at {w}", got["dcp_load_stateful"]) +
              "  optimizer with state, Stateful entries (get/set_state_dict inside dcp.load)")
        print(show(f"dcp restore at {w}", got["dcp_load_fresh"]) +
              "  fresh optimizer (get_state_dict + dcp.load + set_state_dict)")
        print(show(f"ckpt restore at {w}", got["ckpt_load_in_place"]) +
              "  optimizer with state, in place (check_first=False)")
        for k in ("ckpt_load", "ckpt_load_live", "ckpt_load_in_place"):
            print(f"{'':<22} ratio dcp/{k} at {w}: "
                  f"{statistics.median(got['dcp_load']) / statistics.median(got[k]):.2f}x")
        stateful = statistics.median(got["dcp_load_stateful"])
        for k in ("ckpt_load_live", "ckpt_load_in_place"):
            print(f"{'':<22} ratio dcp Stateful/{k} at {w}: "
                  f"{stateful / statistics.median(got[k]):.2f}x")
        after = statistics.median(got["dcp_load_fresh"]) / statistics.median(got["ckpt_load"])
        print(f"{'':<22} ratio after a restart, dcp restore/ckpt_load at {w}: {after:.2f}x")


if __name__ == "__main__":
    main()
