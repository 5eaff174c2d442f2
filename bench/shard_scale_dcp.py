"""DCP's side of the sharded-checkpoint scale simulation (issue "Sharded training state"): the same
layout bench/shard_index_bench.cc measures for ckpt's INDEX — a Llama-7B-shaped model (32 layers,
hidden 4096, MLP 11008, vocab 32000: 291 tensors) plus Adam's two moments, FSDP Shard(0) over N
ranks — described the way torch.distributed.checkpoint describes it, in one process, no ranks
launched, no file written:

- the `.metadata` object (state_dict_metadata with every rank's chunk, storage_data with every
  chunk's file, offset and length), its pickled size and bytes per chunk: what DCP writes at
  commit and what **every** rank reads and unpickles before a load;
- pickle and unpickle time;
- one rank's load plan at half the ranks (planner_helpers.create_read_items_for_chunk_list over
  its local chunks, what DefaultLoadPlanner.create_local_plan runs per tensor);
- with --global-plan, rank 0's DefaultSavePlanner.create_global_plan over N local save plans (the
  dedup, the metadata and the validation at save: slow beyond a few hundred ranks).

Then it runs ckpt's own build/bench/shard_index_bench for the same rank counts (when built) and
prints both. Needs torch >= 2.4 (a CPU wheel is enough; scripts/torch2-venv.sh makes one).

    python bench/shard_scale_dcp.py [--ranks 1024,4096] [--global-plan 64,256]
"""
from __future__ import annotations

import argparse
import io
import os
import pathlib
import pickle
import subprocess
import sys
import time

import torch
from torch.distributed.checkpoint import metadata as md
from torch.distributed.checkpoint import planner_helpers
from torch.distributed.checkpoint.filesystem import _StorageInfo
from torch.distributed.checkpoint.planner import (SavePlan, TensorWriteData, WriteItem,
                                                  WriteItemType)

ROOT = pathlib.Path(__file__).resolve().parents[1]


def llama_7b():
    h, mlp, vocab = 4096, 11008, 32000
    p = [("tok_embeddings.weight", (vocab, h))]
    for layer in range(32):
        b = f"layers.{layer}."
        for w in ("attention.wq", "attention.wk", "attention.wv", "attention.wo"):
            p.append((b + w + ".weight", (h, h)))
        p += [(b + "feed_forward.w1.weight", (mlp, h)), (b + "feed_forward.w2.weight", (h, mlp)),
              (b + "feed_forward.w3.weight", (mlp, h)), (b + "attention_norm.weight", (h,)),
              (b + "ffn_norm.weight", (h,))]
    p += [("norm.weight", (h,)), ("output.weight", (vocab, h))]
    tensors = [("model." + n, s) for n, s in p]
    for suffix in ("exp_avg", "exp_avg_sq"):
        tensors += [(f"optim.state.{n}.{suffix}", s) for n, s in p]
    return tensors


def chunk(n, k, r):
    c = (n + k - 1) // k
    lo, hi = min(r * c, n), min((r + 1) * c, n)
    return lo, hi - lo


def local_chunks(shape, ranks, r):
    off, size = chunk(shape[0], ranks, r)
    if size == 0:
        return None
    return md.ChunkStorageMetadata(offsets=torch.Size((off,) + (0,) * (len(shape) - 1)),
                                   sizes=torch.Size((size,) + tuple(shape[1:])))


def build_metadata(tensors, ranks):
    props = md.TensorProperties(dtype=torch.float32)
    sdm, storage = {}, {}
    offsets = [0] * ranks
    for fqn, shape in tensors:
        chunks = []
        for r in range(ranks):
            c = local_chunks(shape, ranks, r)
            if c is None:
                continue
            chunks.append(c)
            length = 4
            for s in c.sizes:
                length *= s
            storage[md.MetadataIndex(fqn, c.offsets)] = _StorageInfo(f"__{r}_0.distcp",
                                                                     offsets[r], length)
            offsets[r] += length
        sdm[fqn] = md.TensorStorageMetadata(props, torch.Size(shape), chunks)
    return md.Metadata(state_dict_metadata=sdm, storage_data=storage), len(storage)


def one_rank_load_plan(meta, tensors, ranks, r):
    items = 0
    for fqn, shape in tensors:
        c = local_chunks(shape, ranks, r)
        if c is None:
            continue
        items += len(planner_helpers.create_read_items_for_chunk_list(
            fqn, meta.state_dict_metadata[fqn], [c]))
    return items


def global_save_plan(tensors, ranks):
    from torch.distributed.checkpoint.default_planner import DefaultSavePlanner
    props = md.TensorProperties(dtype=torch.float32)
    plans = []
    for r in range(ranks):
        items = []
        for fqn, shape in tensors:
            c = local_chunks(shape, ranks, r)
            if c is None:
                continue
            items.append(WriteItem(index=md.MetadataIndex(fqn, c.offsets),
                                   type=WriteItemType.SHARD,
                                   tensor_data=TensorWriteData(chunk=c, properties=props,
                                                               size=torch.Size(shape))))
        plans.append(SavePlan(items, planner_data={}))  # no FQN mappings: nothing flattened
    planner = DefaultSavePlanner()
    t0 = time.perf_counter()
    planner.create_global_plan(plans)
    return time.perf_counter() - t0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ranks", default="1024,4096", help="rank counts (comma separated)")
    ap.add_argument("--global-plan", default="",
                    help="also time DefaultSavePlanner.create_global_plan at these rank counts "
                         "(minutes beyond ~512 ranks)")
    args = ap.parse_args()
    tensors = llama_7b()
    print(f"shard_scale_dcp: torch {torch.__version__}, Llama-7B-shaped + Adam, {len(tensors)} "
          "float32 tensors, FSDP Shard(0); one process, nothing written")
    print(f"{'ranks':>6} {'chunks':>9} {'.metadata':>10} {'B/chunk':>8} {'build s':>8} "
          f"{'pickle s':>9} {'unpickle s':>11} {'1-rank plan ms (at N/2)':>24}")
    for ranks in [int(x) for x in args.ranks.split(",") if x]:
        t0 = time.perf_counter()
        meta, chunks = build_metadata(tensors, ranks)
        t_build = time.perf_counter() - t0
        buf = io.BytesIO()
        t0 = time.perf_counter()
        pickle.dump(meta, buf)
        t_pickle = time.perf_counter() - t0
        blob = buf.getvalue()
        t0 = time.perf_counter()
        pickle.loads(blob)
        t_unpickle = time.perf_counter() - t0
        t0 = time.perf_counter()
        one_rank_load_plan(meta, tensors, ranks // 2, ranks // 4)
        t_plan = time.perf_counter() - t0
        print(f"{ranks:>6} {chunks:>9} {len(blob) / 2**20:>8.1f}Mi {len(blob) / chunks:>8.1f} "
              f"{t_build:>8.2f} {t_pickle:>9.2f} {t_unpickle:>11.2f} {t_plan * 1e3:>24.1f}")
        del meta, blob
    for ranks in [int(x) for x in args.global_plan.split(",") if x]:
        print(f"DefaultSavePlanner.create_global_plan at {ranks} ranks: "
              f"{global_save_plan(tensors, ranks):.2f} s")
    ours = pathlib.Path(os.environ.get("CKPT_BUILD_DIR", ROOT / "build")) / "bench" / \
        "shard_index_bench"
    if ours.exists():
        print("\nckpt's INDEX for the same layouts (bench/shard_index_bench):", flush=True)
        return subprocess.call([str(ours), "--ranks", args.ranks])
    print(f"\n(ckpt's side: build {ours} and run it with --ranks {args.ranks})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
