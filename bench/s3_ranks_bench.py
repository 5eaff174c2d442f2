#!/usr/bin/env python3
"""ckpt against torch.distributed.checkpoint (DCP) at several ranks on one S3 server: an FSDP2
model (gloo ranks on 127.0.0.1, each a process) saved and restored by each, every rank writing
and reading its own shards, on the same local SeaweedFS (scripts/s3-server.sh, loopback). DCP
goes through FsspecWriter/FsspecReader over s3fs with thread_count=8 per rank.

  PYTHONPATH=build/python build/python/torch2-venv/bin/python bench/s3_ranks_bench.py \\
      [--ranks 2] [--mb 512] [--reps 2]

Times are wall seconds from a barrier before to a barrier after (the slowest rank), medians of
--reps rounds; restores are checked bit-exact on every rank. Needs a torch 2.x python
(scripts/torch2-venv.sh); s3fs comes from PyPI into build/s3-dcp-deps.
"""
import argparse
import json
import os
import socket
import subprocess
import sys
import time
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from s3_common import BUILD, pip_target, print_medians, start_server, stop_server  # noqa: E402


def rank_main(cfg):
    import torch
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard
    pip_target("s3-dcp-deps", "s3fs==2024.12.0", "s3fs")
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint import FsspecReader, FsspecWriter
    import ckpt

    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    mesh = init_device_mesh("cpu", (world,))
    torch.manual_seed(0)
    model = torch.nn.Sequential(*[torch.nn.Linear(cfg["dim"], cfg["dim"], bias=False)
                                  for _ in range(cfg["layers"])])
    for layer in model:
        fully_shard(layer, mesh=mesh)
    fully_shard(model, mesh=mesh)
    local = [p.to_local() for p in model.parameters()]
    want = [t.clone() for t in local]
    opts = dict(key=os.environ["AWS_ACCESS_KEY_ID"], secret=os.environ["AWS_SECRET_ACCESS_KEY"],
                client_kwargs={"endpoint_url": os.environ["AWS_ENDPOINT_URL"],
                               "region_name": "us-east-1"})

    def timed(fn):
        dist.barrier()
        t0 = time.perf_counter()
        fn()
        dist.barrier()
        return time.perf_counter() - t0

    def zero():
        with torch.no_grad():
            for t in local:
                t.zero_()

    def same():
        ok = torch.tensor([int(all(torch.equal(a, b) for a, b in zip(local, want)))])
        dist.all_reduce(ok, op=dist.ReduceOp.MIN)
        assert ok.item() == 1, "a restore was not bit-exact"

    rows = {"ckpt save": [], "ckpt restore": [], "DCP save": [], "DCP restore": []}
    for rep in range(cfg["reps"]):
        base = f"{cfg['prefix']}/r{rep}"
        run = f"{base}/ckpt"
        with ckpt.Checkpointer(run, keep_last=1) as ck:
            ck.track(model=model)
            rows["ckpt save"].append(timed(lambda: ck.save(1)))
        zero()
        with ckpt.Checkpointer(run) as ck:
            ck.track(model=model)
            rows["ckpt restore"].append(timed(ck.restore_latest))
        same()
        path = f"{base}/dcp"
        rows["DCP save"].append(timed(lambda: dcp.save(
            model.state_dict(), storage_writer=FsspecWriter(path, thread_count=8,
                                                            sync_files=False, **opts))))
        zero()
        sd = model.state_dict()
        rows["DCP restore"].append(timed(lambda: dcp.load(
            sd, storage_reader=FsspecReader(path, **opts))))
        same()
    if rank == 0:
        with open(cfg["out"], "w") as f:
            json.dump(rows, f)
    dist.destroy_process_group()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--ranks", type=int, default=2)
    p.add_argument("--mb", type=int, default=512)
    p.add_argument("--dim", type=int, default=2048)
    p.add_argument("--reps", type=int, default=2)
    p.add_argument("--rank-config", default="", help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.rank_config:
        with open(a.rank_config) as f:
            rank_main(json.load(f))
        return
    d = BUILD / "s3-ranks-bench-server"
    env = start_server(d)
    try:
        pip_target("s3-dcp-deps", "s3fs==2024.12.0", "s3fs")
        layers = max(1, a.mb * (1 << 20) // (a.dim * a.dim * 4))
        out = BUILD / "s3-ranks-bench.json"
        cfg = {"dim": a.dim, "layers": layers, "reps": a.reps, "out": str(out),
               "prefix": f"s3://{env['CKPT_S3_TEST_BUCKET']}/bench-{uuid.uuid4().hex}"}
        conf = BUILD / "s3-ranks-bench.config.json"
        conf.write_text(json.dumps(cfg))
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        procs = []
        for r in range(a.ranks):
            renv = dict(os.environ, RANK=str(r), WORLD_SIZE=str(a.ranks), LOCAL_RANK=str(r),
                        MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), OMP_NUM_THREADS="1",
                        PYTHONWARNINGS="ignore")
            procs.append(subprocess.Popen([sys.executable, __file__, "--rank-config", str(conf)],
                                          env=renv))
        for pr in procs:
            if pr.wait() != 0:
                sys.exit(f"a rank failed (exit {pr.returncode})")
        rows = json.loads(out.read_text())
        mb = layers * a.dim * a.dim * 4 / 1e6
        import torch
        print(f"state: {layers} x Linear({a.dim}, {a.dim}) = {mb:.0f} MB, FSDP2 over {a.ranks} "
              f"gloo ranks; {a.reps} rounds; SeaweedFS on loopback; torch {torch.__version__}")
        med = print_medians(rows, mb)
        print(f"save:    ckpt / DCP throughput = {med['DCP save'] / med['ckpt save']:.2f}x "
              "(goal > 1)")
        print(f"restore: ckpt / DCP throughput = {med['DCP restore'] / med['ckpt restore']:.2f}x "
              "(goal > 1)")
    finally:
        stop_server(d)


if __name__ == "__main__":
    main()
