"""Sharded (FSDP2) checkpoints on S3 (docs/object-storage.md) against the s3_server fixture's
SeaweedFS: a 2-rank run saved to s3:// restores at 3 ranks and in one plain process, every
parameter and Adam moment bit-identical, each rank reading only the rank files its shards lie in
(its GETs and bytes counted by ckpt._core.store_traffic). Boxes are read whole — each one's hash
covers all of it — so a rank whose rows straddle two saved shards reads both boxes."""
import json

import pytest

from shard_harness import torch2_python, train
from test_s3 import _cli, s3  # noqa: F401  (the fixture)

HIDDEN = 12288  # ~2 MB of parameters and moments: tensor bytes dominate the file structure


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
    sharded tensor, the bytes of the saved boxes those rows lie in (read whole: each box's hash
    is checked over all of it), and the rank files those boxes are in."""
    need, boxes, files = [0] * world, [0] * world, [set() for _ in range(world)]
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
                if lo < hi and b_lo < hi and lo < b_hi:
                    boxes[r] += b["nbytes"]
                    files[r].add(b["file"])
    return need, boxes, files


def test_fsdp2_on_s3_restores_at_three_ranks_reading_only_what_each_needs(saved, tmp_path):
    import ckpt._core as core
    run, stopped = saved
    index = core.read_index(run + "/step-000000000004")
    got = train(tmp_path, "at3", 3, run=run, layout="fsdp", steps=6, hidden=HIDDEN)
    assert got["restored_step"] == 4 and got["world"] == 3
    assert got["restored"] == stopped["digests"]["4"]
    need, boxes, files = _expected(index, 3)
    # Ranks 0 and 2 hold rows of one saved rank's shards; rank 1's rows straddle both.
    assert files == [{"rank-00000.h5"}, {"rank-00000.h5", "rank-00001.h5"}, {"rank-00001.h5"}]
    v = _cli("verify", run, "--json")
    assert v.returncode == 0, v.stderr
    file_bytes = json.loads(v.stdout)["checkpoints"][0]["bytes"] / 2  # each rank file, about
    for rank, t in enumerate(got["restore_traffic"]):
        print(f"rank {rank} of 3: {t['gets']} GETs, {t['bytes_down']} bytes; its rows "
              f"{need[rank]} bytes, the boxes they lie in {boxes[rank]} bytes "
              f"({len(files[rank])} of 2 rank files)")
        # At least its rows; at most the files its rows lie in (boxes are read whole, each
        # box's hash checked over all of it), once, plus the INDEX, commit record and manifests.
        assert need[rank] <= t["bytes_down"] <= len(files[rank]) * file_bytes + (96 << 10)
    assert got["step"] == 6  # training went on, saving on the store


def test_fsdp2_on_s3_restores_into_one_plain_process(saved, tmp_path):
    run, stopped = saved
    got = train(tmp_path, "plain", 1, run=run, layout="plain", steps=5, hidden=HIDDEN)
    assert got["restored_step"] == 4
    assert got["restored"] == stopped["digests"]["4"]
    assert got["restore_traffic"][0]["bytes_down"] >= 3 * 4 * 15 * HIDDEN  # all of it
