#!/usr/bin/python3
"""ckpt on S3 against the server's own ceiling: boto3's multipart upload and parallel ranged
download of the same bytes, same process, same local SeaweedFS (scripts/s3-server.sh, loopback).

A model of --mb MB (an MLP of --dim x --dim Linear layers, float32) is saved by ckpt to
s3://BUCKET/bench-…/run (blocking: every rank object uploaded, COMMIT.json, LATEST), then restored
by a fresh Checkpointer into the live model (ranged GETs, every hash checked). The peer uploads a
bytes object of the same size with boto3's upload_fileobj (TransferConfig: 16 MiB parts, 8
threads, as ckpt's defaults) and downloads it with download_fileobj. --reps rounds; medians and
ratios printed (issue goal: ckpt >= 0.9x of boto3 both ways). Also: objects per checkpoint.
With --optimizer the state adds an AdamW's moments (after one step), restored into a fresh
AdamW, as a restarted process has it: the check-first restore fills the fresh moments while it
checks them and keeps only the model's bytes for its second read; boto3 moves the same bytes.

  PYTHONPATH=build/python /usr/bin/python3 bench/s3_bench.py [--mb 1024] [--reps 3] [--optimizer]

boto3 comes from PyPI into build/s3-bench-deps (pip --target), the server from scripts/s3-server.sh.
"""
import argparse
import io
import os
import sys
import time
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from s3_common import BUILD, pip_target, print_medians, start_server, stop_server  # noqa: E402


def boto3_module():
    pip_target("s3-bench-deps", "boto3==1.35.99", "boto3")
    import boto3
    from boto3.s3.transfer import TransferConfig
    return boto3, TransferConfig


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--mb", type=int, default=1024)
    p.add_argument("--dim", type=int, default=2048)
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--optimizer", action="store_true",
                   help="AdamW moments too, restored into a fresh optimizer (a restart)")
    a = p.parse_args()
    d = BUILD / "s3-bench-server"
    env = start_server(d)
    try:
        boto3, TransferConfig = boto3_module()
        import torch
        import ckpt
        layers = max(1, a.mb * (1 << 20) // (a.dim * a.dim * 4))
        model = torch.nn.Sequential(*[torch.nn.Linear(a.dim, a.dim, bias=False)
                                      for _ in range(layers)])
        opt = None
        if a.optimizer:  # moments exist after a step
            opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
            model(torch.randn(2, a.dim)).sum().backward()
            opt.step()
        state = dict(model=model, optimizer=opt) if opt is not None else dict(model=model)
        nbytes = sum(t.numel() * t.element_size() for t in model.state_dict().values())
        if opt is not None:
            nbytes += sum(v.numel() * v.element_size() for st in opt.state.values()
                          for v in st.values() if isinstance(v, torch.Tensor) and v.dim() > 0)
        bucket = env["CKPT_S3_TEST_BUCKET"]
        s3 = boto3.client("s3", endpoint_url=env["AWS_ENDPOINT_URL"], region_name="us-east-1")
        cfg = TransferConfig(multipart_chunksize=16 << 20, max_concurrency=8,
                             multipart_threshold=16 << 20)
        payload = os.urandom(1 << 20) * (nbytes >> 20)
        rows = {"ckpt save": [], "ckpt restore": [], "boto3 upload": [], "boto3 download": []}
        objects = 0
        for rep in range(a.reps):
            run = f"s3://{bucket}/bench-{uuid.uuid4().hex}/run"
            with ckpt.Checkpointer(run, keep_last=1) as ck:
                ck.track(**state)
                t0 = time.perf_counter()
                ck.save(rep + 1)
                rows["ckpt save"].append(time.perf_counter() - t0)
            with ckpt.Checkpointer(run, keep_last=1) as ck:
                if opt is not None:  # a restarted process: its optimizer has no state yet
                    ck.track(model=model, optimizer=torch.optim.AdamW(model.parameters(), lr=1e-3))
                else:
                    ck.track(model=model)
                t0 = time.perf_counter()
                assert ck.restore_latest().restored
                rows["ckpt restore"].append(time.perf_counter() - t0)
            prefix = run.split("/", 3)[3]
            objects = s3.list_objects_v2(Bucket=bucket, Prefix=prefix + "/").get("KeyCount", 0)
            key = f"peer-{uuid.uuid4().hex}"
            t0 = time.perf_counter()
            s3.upload_fileobj(io.BytesIO(payload), bucket, key, Config=cfg)
            rows["boto3 upload"].append(time.perf_counter() - t0)
            sink = io.BytesIO()
            t0 = time.perf_counter()
            s3.download_fileobj(bucket, key, sink, Config=cfg)
            rows["boto3 download"].append(time.perf_counter() - t0)
        mb = nbytes / 1e6
        print(f"state: {layers} x Linear({a.dim}, {a.dim})"
              f"{' + AdamW moments (restored into a fresh AdamW)' if opt is not None else ''}"
              f" = {mb:.0f} MB; {a.reps} rounds; server: SeaweedFS on loopback")
        med = print_medians(rows, mb)
        print(f"save:    ckpt / boto3 throughput = {med['boto3 upload'] / med['ckpt save']:.2f}x "
              f"(goal >= 0.9x)")
        print(f"restore: ckpt / boto3 throughput = "
              f"{med['boto3 download'] / med['ckpt restore']:.2f}x (goal >= 0.9x)")
        print(f"objects in the run after a save: {objects} (rank file, manifest, COMMIT.json, "
              f"LATEST, LOCK while held, journal)")
    finally:
        stop_server(d)


if __name__ == "__main__":
    main()
