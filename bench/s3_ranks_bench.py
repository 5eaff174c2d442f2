#!/usr/bin/env python3
"""ckpt against torch.distributed.checkpoint (DCP) at several ranks on one S3 server: an FSDP2
model (gloo ranks on 127.0.0.1, each a process) saved and restored by each, every rank writing
and reading its own shards, on the same local SeaweedFS (scripts/s3-server.sh, loopback). DCP
goes through FsspecWriter/FsspecReader over s3fs with thread_count=8 per rank. The server's own
ceiling at as many ranks: each rank also uploads the very bytes it saves (its local shards, one
object) with boto3's multipart upload (TransferConfig: 8 MiB parts, 8 threads) and downloads
them back with ranged GETs (8 MiB ranges, 8 threads) into a preallocated buffer. ckpt restores
twice: check first (the default: every hash checked before a live byte changes, so the checked
bytes are kept in memory, then copied into the live shards) and in place
(restore_latest(check_first=False): the same checks as the bytes land in the live shards),
which of the two first alternating by round. After each save or upload every rank calls sync()
(untimed): the server's new GB is otherwise written back to disk by the kernel some 30 s later,
inside whichever peer's timing runs then.

  PYTHONPATH=build/python build/python/torch2-venv/bin/python bench/s3_ranks_bench.py \\
      [--ranks 2] [--mb 512] [--reps 2]

Each rank first uploads its bytes once, untimed (a fresh server allocates its volumes on the
first writes), and each round starts with another peer. Times are wall seconds from a barrier before to a barrier after (the slowest
rank), medians of --reps rounds; restores and downloads are checked bit-exact on every rank. MB/s are all ranks'
bytes together. Ratios printed: ckpt's throughput over DCP's and over boto3's, save and restore
(> 1: ckpt faster). Needs a torch 2.x python (scripts/torch2-venv.sh); s3fs and boto3 come from
PyPI into build/s3-ranks-deps.
"""
import argparse
import io
import json
import os
import socket
import subprocess
import sys
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from s3_common import BUILD, pip_target, print_medians, start_server, stop_server  # noqa: E402

PART = 16 << 20  # boto3's multipart parts: ckpt's own (ckpt/io/s3/config.h part_bytes)
RANGE = 8 << 20  # the download's ranged GETs: ckpt's reads on a store (ReadProfile)


def deps():
    """s3fs (DCP) and boto3 into build/s3-ranks-deps, resolved together: a rank imports both and
    they share one botocore (s3-dcp-deps' and s3-bench-deps' botocore differ)."""
    pip_target("s3-ranks-deps", "s3fs[boto3]==2024.12.0", "boto3")


def s3_client():
    """boto3's client for the server, with no checksums of its own: ckpt sends none, and nor did
    boto3 1.35, s3_bench.py's peer."""
    import boto3
    from botocore.config import Config
    return boto3.client("s3", endpoint_url=os.environ["AWS_ENDPOINT_URL"], region_name="us-east-1",
                        config=Config(request_checksum_calculation="when_required",
                                      response_checksum_validation="when_required"))


def boto3_upload(s3, key, payload):
    """payload as one object: boto3's multipart upload, PART-sized parts, 8 threads."""
    from boto3.s3.transfer import TransferConfig
    cfg = TransferConfig(multipart_threshold=PART, multipart_chunksize=PART, max_concurrency=8)
    s3.upload_fileobj(io.BytesIO(payload), os.environ["CKPT_S3_TEST_BUCKET"], key, Config=cfg)


def ranged_download(s3, key, view):
    """The object into view (a writable memoryview of its size): RANGE-sized ranged GETs, 8
    threads."""
    def get(start):
        end = min(start + RANGE, len(view))
        view[start:end] = s3.get_object(Bucket=os.environ["CKPT_S3_TEST_BUCKET"], Key=key,
                                        Range=f"bytes={start}-{end - 1}")["Body"].read()

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(get, range(0, len(view), RANGE)))


def rank_main(cfg):
    import torch
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard
    deps()
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
    flat = torch.cat([t.detach().reshape(-1) for t in want]).view(torch.uint8)
    payload = flat.numpy().tobytes()
    sink = torch.empty_like(flat)
    s3 = s3_client()
    opts = dict(key=os.environ["AWS_ACCESS_KEY_ID"], secret=os.environ["AWS_SECRET_ACCESS_KEY"],
                client_kwargs={"endpoint_url": os.environ["AWS_ENDPOINT_URL"],
                               "region_name": "us-east-1"})

    def timed(fn):
        dist.barrier()
        t0 = time.perf_counter()
        fn()
        dist.barrier()
        return time.perf_counter() - t0

    def settle():
        """The server's disk catches up with what the save just wrote (untimed, every peer
        alike). Else the kernel writes those dirty pages back when they expire (30 s), inside
        whichever peer's timing runs then."""
        os.sync()
        dist.barrier()

    def zero():
        with torch.no_grad():
            for t in local:
                t.zero_()

    def agree(ok, what):
        ok = torch.tensor([int(ok)])
        dist.all_reduce(ok, op=dist.ReduceOp.MIN)
        assert ok.item() == 1, what

    def same():
        agree(all(torch.equal(a, b) for a, b in zip(local, want)), "a restore was not bit-exact")

    rows = {"ckpt save": [], "ckpt restore": [], "ckpt restore in place": [], "DCP save": [],
            "DCP restore": [], "boto3 upload": [], "boto3 download": []}
    # Untimed: a fresh server allocates its volumes on the first writes, and whoever writes first
    # pays (boto3 measured first in a round: 12.3 s in round 1, then 5.0; ckpt 4.8).
    timed(lambda: boto3_upload(s3, f"{cfg['prefix'].split('/', 3)[3]}/warmup/rank{rank}",
                               payload))
    def ckpt_round(base, rep):
        run = f"{base}/ckpt"
        with ckpt.Checkpointer(run, keep_last=1) as ck:
            ck.track(model=model)
            rows["ckpt save"].append(timed(lambda: ck.save(1)))
        settle()
        # In one run of 4 rounds the first restore after a save was 0.2 s slower than the second
        # in every round, whichever it was (not in others), so which goes first alternates.
        both = [("ckpt restore", True), ("ckpt restore in place", False)]
        for name, check_first in (both if rep % 2 == 0 else both[::-1]):
            zero()
            with ckpt.Checkpointer(run) as ck:
                ck.track(model=model)
                rows[name].append(timed(lambda: ck.restore_latest(check_first=check_first)))
            same()

    def dcp_round(base, rep):
        path = f"{base}/dcp"
        rows["DCP save"].append(timed(lambda: dcp.save(
            model.state_dict(), storage_writer=FsspecWriter(path, thread_count=8,
                                                            sync_files=False, **opts))))
        settle()
        zero()
        sd = model.state_dict()
        rows["DCP restore"].append(timed(lambda: dcp.load(
            sd, storage_reader=FsspecReader(path, **opts))))
        same()

    def boto3_round(base, rep):
        key = f"{base.split('/', 3)[3]}/boto3/rank{rank}"
        rows["boto3 upload"].append(timed(lambda: boto3_upload(s3, key, payload)))
        settle()
        sink.zero_()
        rows["boto3 download"].append(timed(lambda: ranged_download(s3, key,
                                                                    memoryview(sink.numpy()))))
        agree(torch.equal(sink, flat), "a download was not bit-exact")

    # Each round starts with another peer: the server's own pauses (growing its volumes) fall on
    # whoever writes when they come, so no peer is always first.
    peers = [ckpt_round, dcp_round, boto3_round]
    for rep in range(cfg["reps"]):
        for k in range(len(peers)):
            peers[(rep + k) % len(peers)](f"{cfg['prefix']}/r{rep}", rep)
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
        sys.stdout.flush()
        os._exit(0)  # a gloo thread freeing tensors during finalization aborts
        return
    d = BUILD / "s3-ranks-bench-server"
    env = start_server(d)
    try:
        deps()
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
        import boto3
        import s3fs
        import torch
        print(f"state: {layers} x Linear({a.dim}, {a.dim}) = {mb:.0f} MB, FSDP2 over {a.ranks} "
              f"gloo ranks; {a.reps} rounds; SeaweedFS on loopback; torch {torch.__version__}")
        print(f"peers per rank: DCP over s3fs {s3fs.__version__} (thread_count=8); boto3 "
              f"{boto3.__version__} upload_fileobj ({PART >> 20} MiB parts, 8 threads), ranged "
              f"GETs ({RANGE >> 20} MiB, 8 threads)")
        med = print_medians(rows, mb)
        print(f"save:    ckpt / DCP throughput = {med['DCP save'] / med['ckpt save']:.2f}x "
              "(goal > 1)")
        print(f"restore: ckpt / DCP throughput = {med['DCP restore'] / med['ckpt restore']:.2f}x "
              "(goal > 1)")
        print(f"save:    ckpt / boto3 throughput = "
              f"{med['boto3 upload'] / med['ckpt save']:.2f}x (boto3: the server's ceiling)")
        print(f"restore: ckpt / boto3 throughput = "
              f"{med['boto3 download'] / med['ckpt restore']:.2f}x (boto3: the server's ceiling)")
        print(f"restore in place (check_first=False): ckpt / boto3 throughput = "
              f"{med['boto3 download'] / med['ckpt restore in place']:.2f}x, ckpt / DCP = "
              f"{med['DCP restore'] / med['ckpt restore in place']:.2f}x")
    finally:
        stop_server(d)


if __name__ == "__main__":
    main()
