"""Sharded (FSDP2) checkpoints on S3 (docs/object-storage.md) against the s3_server fixture's
SeaweedFS: a 2-rank run saved to s3:// restores at 3 ranks and in one plain process, every
parameter and Adam moment bit-identical, each rank reading only the rank files its shards lie in
and, of the saved boxes there, only the chunks its rows touch (boxes over 1 MiB carry a digest per
1 MiB chunk, docs/format.md §4; smaller ones are read whole, their one hash covering all of it).
Its GETs and bytes are counted by ckpt._core.store_traffic."""

import pytest

from shard_harness import torch2_python, train
from test_s3 import _cli, s3  # noqa: F401  (the fixture)

HIDDEN = 98304  # ~18 MB of parameters and moments; the first weight's boxes span 1.5 chunks
CHUNK = 1 << 20  # kBoxChunkBytes (ckpt/format/manifest.h)


@pytest.fixture
def saved(s3, tmp_path):  # noqa: F811
    torch2_python()
    run = s3 + "/fsdp"
    stopped = train(tmp_path, "stopped", 2, run=run, layout="fsdp", steps=8, stop_after=4,
                    hidden=HIDDEN)
    assert stopped["step"] == 4
    return run, stopped


def _expected(index, world):
    """Per rank at `world` (FSDP2: dim 0 in torch.chunk pieces): the bytes of its own rows of every
    sharded tensor, the bytes of the saved boxes those rows lie in, the bytes it should read of
    them (the chunks its rows touch of a box over one chunk, else the whole box), and the rank
    files those boxes are in."""
    need, boxes, reads = [0] * world, [0] * world, [0] * world
    files = [set() for _ in range(world)]
    for t in index["tensors"]:
        if t["placement"] != "sharded":
            continue
        rows = t["shape"][0]
        row_bytes = sum(b["nbytes"] for b in t["boxes"]) // rows
        chunk = -(-rows // world)
        for r in range(world):
            lo, hi = min(rows, r * chunk), min(rows, (r + 1) * chunk)
            need[r] += (hi - lo) * row_bytes
            for b in t["boxes"]:
                b_lo, b_hi = b["offsets"][0], b["offsets"][0] + b["sizes"][0]
                if not (lo < hi and b_lo < hi and lo < b_hi):
                    continue
                boxes[r] += b["nbytes"]
                files[r].add(b["file"])
                if b["nbytes"] <= CHUNK:
                    reads[r] += b["nbytes"]
                    continue
                first = (max(lo, b_lo) - b_lo) * row_bytes // CHUNK * CHUNK
                last = min(b["nbytes"], -(-(min(hi, b_hi) - b_lo) * row_bytes // CHUNK) * CHUNK)
                reads[r] += last - first
    return need, boxes, reads, files


def test_fsdp2_on_s3_restores_at_three_ranks_reading_only_what_each_needs(saved, tmp_path):
    import ckpt._core as core
    run, stopped = saved
    index = core.read_index(run + "/step-000000000004")
    got = train(tmp_path, "at3", 3, run=run, layout="fsdp", steps=6, hidden=HIDDEN)
    assert got["restored_step"] == 4 and got["world"] == 3
    assert got["restored"] == stopped["digests"]["4"]
    need, boxes, reads, files = _expected(index, 3)
    # Ranks 0 and 2 hold rows of one saved rank's shards; rank 1's rows straddle both.
    assert files == [{"rank-00000.h5"}, {"rank-00000.h5", "rank-00001.h5"}, {"rank-00001.h5"}]
    v = _cli("verify", run, "--json")
    assert v.returncode == 0, v.stderr
    for rank, t in enumerate(got["restore_traffic"]):
        print(f"rank {rank} of 3: {t['gets']} GETs, {t['bytes_down']} bytes; its rows "
              f"{need[rank]} bytes, their chunks {reads[rank]} bytes, the boxes they lie in "
              f"{boxes[rank]} bytes ({len(files[rank])} of 2 rank files)")
        # At least its rows; at most the chunks they touch (each chunk's hash checked over all
        # of it), once, plus its file's structure and unsharded state (~280 KB here), the INDEX,
        # commit record and manifests, and padding between boxes.
        assert need[rank] <= t["bytes_down"] <= reads[rank] + (512 << 10)
    # The straddling rank reads less than the boxes its rows lie in: chunks, not boxes.
    assert got["restore_traffic"][1]["bytes_down"] < boxes[1] - (1 << 20)
    assert got["step"] == 6  # training went on, saving on the store


def test_fsdp2_on_s3_restores_into_one_plain_process(saved, tmp_path):
    run, stopped = saved
    got = train(tmp_path, "plain", 1, run=run, layout="plain", steps=5, hidden=HIDDEN)
    assert got["restored_step"] == 4
    assert got["restored"] == stopped["digests"]["4"]
    assert got["restore_traffic"][0]["bytes_down"] >= 3 * 4 * 15 * HIDDEN  # all of it
