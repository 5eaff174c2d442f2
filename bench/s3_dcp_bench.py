#!/usr/bin/env python3
"""ckpt against torch.distributed.checkpoint (DCP) on the same S3 server: the same model state
saved and restored by each, in one process, on the same local SeaweedFS (scripts/s3-server.sh,
loopback). DCP writes through its FsspecWriter/FsspecReader over s3fs (the fsspec route the issue
allows in place of s3torchconnector), with thread_count=8 (its default is 1) so it gets as many
uploads in flight as ckpt's CKPT_S3_CONCURRENCY default.

  PYTHONPATH=build/python build/python/torch2-venv/bin/python bench/s3_dcp_bench.py [--mb 256]

Needs a torch 2.x python (scripts/torch2-venv.sh); s3fs comes from PyPI into build/s3-dcp-deps.
Prints per side: save and restore seconds and MB/s (medians of --reps rounds), the objects one
checkpoint leaves, and ckpt's requests per save and restore (ckpt._core.store_traffic); the
ratios ckpt / DCP (issue goal: ckpt faster both ways). Restores are checked bit-exact.
"""
import argparse
import os
import sys
import time
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from s3_common import BUILD, pip_target, print_medians, start_server, stop_server  # noqa: E402


def count_objects(fs, path):
    return len(fs.find(path))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--mb", type=int, default=256)
    p.add_argument("--dim", type=int, default=2048)
    p.add_argument("--reps", type=int, default=2)
    a = p.parse_args()
    d = BUILD / "s3-dcp-bench-server"
    env = start_server(d)
    try:
        pip_target("s3-dcp-deps", "s3fs==2024.12.0", "s3fs")
        import s3fs
        import torch
        import torch.distributed.checkpoint as dcp
        from torch.distributed.checkpoint import FsspecReader, FsspecWriter
        import ckpt
        import ckpt._core as core

        bucket = env["CKPT_S3_TEST_BUCKET"]
        opts = dict(key=env["AWS_ACCESS_KEY_ID"], secret=env["AWS_SECRET_ACCESS_KEY"],
                    client_kwargs={"endpoint_url": env["AWS_ENDPOINT_URL"],
                                   "region_name": "us-east-1"})
        fs = s3fs.S3FileSystem(**opts)
        layers = max(1, a.mb * (1 << 20) // (a.dim * a.dim * 4))
        torch.manual_seed(0)
        model = torch.nn.Sequential(*[torch.nn.Linear(a.dim, a.dim, bias=False)
                                      for _ in range(layers)])
        want = {k: v.clone() for k, v in model.state_dict().items()}
        nbytes = sum(t.numel() * t.element_size() for t in want.values())
        rows = {k: [] for k in ("ckpt save", "ckpt restore", "DCP save", "DCP restore")}
        objects, traffic = {}, {}
        for rep in range(a.reps):
            tag = uuid.uuid4().hex
            run = f"s3://{bucket}/bench-{tag}/ckpt"
            with ckpt.Checkpointer(run, keep_last=1) as ck:
                ck.track(model=model)
                t0, c0 = time.perf_counter(), core.store_traffic()
                ck.save(rep + 1)
                rows["ckpt save"].append(time.perf_counter() - t0)
                traffic["save"] = {k: v - c0[k] for k, v in core.store_traffic().items()}
            with torch.no_grad():
                for prm in model.parameters():
                    prm.zero_()
            with ckpt.Checkpointer(run) as ck:
                ck.track(model=model)
                t0, c0 = time.perf_counter(), core.store_traffic()
                rep_ = ck.restore_latest()
                rows["ckpt restore"].append(time.perf_counter() - t0)
                traffic["restore"] = {k: v - c0[k] for k, v in core.store_traffic().items()}
            assert rep_.restored and all(torch.equal(model.state_dict()[k], v)
                                         for k, v in want.items())
            objects["ckpt"] = count_objects(fs, f"{bucket}/bench-{tag}/ckpt")

            path = f"s3://{bucket}/bench-{tag}/dcp"
            sd = model.state_dict()
            t0 = time.perf_counter()
            dcp.save(sd, storage_writer=FsspecWriter(path, thread_count=8, sync_files=False,
                                                     **opts))
            rows["DCP save"].append(time.perf_counter() - t0)
            with torch.no_grad():
                for prm in model.parameters():
                    prm.zero_()
            sd = model.state_dict()
            t0 = time.perf_counter()
            dcp.load(sd, storage_reader=FsspecReader(path, **opts))
            rows["DCP restore"].append(time.perf_counter() - t0)
            assert all(torch.equal(model.state_dict()[k], v) for k, v in want.items())
            objects["DCP"] = count_objects(fs, f"{bucket}/bench-{tag}/dcp")

        mb = nbytes / 1e6
        print(f"state: {layers} x Linear({a.dim}, {a.dim}) = {mb:.0f} MB; {a.reps} rounds; "
              f"SeaweedFS on loopback; torch {torch.__version__}")
        med = print_medians(rows, mb)
        print(f"save:    ckpt / DCP throughput = {med['DCP save'] / med['ckpt save']:.2f}x "
              "(goal > 1)")
        print(f"restore: ckpt / DCP throughput = {med['DCP restore'] / med['ckpt restore']:.2f}x "
              "(goal > 1)")
        print(f"objects per checkpoint: ckpt {objects['ckpt']} (with journal, LATEST, run lock "
              f"released), DCP {objects['DCP']}")
        for what, t in traffic.items():
            print(f"ckpt requests per {what}: " + ", ".join(f"{k} {v}" for k, v in t.items()
                                                            if v and not k.startswith("bytes"))
                  + f"; {t['bytes_up'] / 1e6:.1f} MB up, {t['bytes_down'] / 1e6:.1f} MB down")
    finally:
        stop_server(d)


if __name__ == "__main__":
    main()
