"""Sharded training state (issue 22, docs/python.md "Sharded training state"): FSDP2, FSDP + TP
and HSDP runs of a few ranks (gloo on 127.0.0.1, torch 2.x: shard_harness.py), saved with
`ck.track(model=..., optimizer=...)` unchanged, each rank writing its local shards; restored
at other world sizes and layouts, down to one plain process. Every rank is a fresh process."""
import json
import os
import shutil

import pytest

import ckpt._core as core
from shard_harness import torch2_python, train

STEP = "step-000000000004"


@pytest.fixture(scope="module")
def fsdp_runs(tmp_path_factory):
    """FSDP2 at 2 ranks: a run that never stops (8 steps, saves at 4 and 8) and one stopped
    after step 4 (a non-blocking save; its step-4 checkpoint copied aside) and resumed in fresh
    processes."""
    torch2_python()
    d = tmp_path_factory.mktemp("fsdp")
    straight = train(d, "straight", 2, run=str(d / "straight"), layout="fsdp", steps=8)
    stopped = train(d, "stopped", 2, run=str(d / "run"), layout="fsdp", steps=8, stop_after=4,
                    nonblocking=True)  # snapshots of the local shards, committed at close
    shutil.copytree(d / "run", d / "at4")
    resumed = train(d, "resumed", 2, run=str(d / "run"), layout="fsdp", steps=8)
    return {"dir": d, "straight": straight, "stopped": stopped, "resumed": resumed}


def test_fsdp2_stop_and_resume_is_bit_identical(fsdp_runs):
    s, st, r = fsdp_runs["straight"], fsdp_runs["stopped"], fsdp_runs["resumed"]
    assert st["step"] == 4 and r["restored_step"] == 4 and r["step"] == 8
    assert r["restored"] == st["digests"]["4"] == s["digests"]["4"]
    assert len(s["final"]) == 4 * 3  # 4 parameters, each with two moments
    assert r["final"] == s["final"]
    assert r["digests"]["8"] == s["digests"]["8"]


def test_each_rank_writes_its_own_shards_once(fsdp_runs):
    d = str(fsdp_runs["dir"] / "at4" / STEP)
    idx = core.read_index(d)
    assert idx["index_version"] == 2
    names = {t["name"]: t for t in idx["tensors"]}
    w = names["/model/0.weight"]
    assert w["shape"] == [16, 8] and w["placement"] == "sharded"
    assert [(b["file"], b["offsets"], b["sizes"]) for b in w["boxes"]] == [
        ("rank-00000.h5", [0, 0], [8, 8]), ("rank-00001.h5", [8, 0], [8, 8])]
    _one_copy_each(idx)
    assert any(n.startswith("/optimizer/state/") and n.endswith("/exp_avg") for n in names)
    attrs = core.OpenRank(d, 1).tree["attrs"]
    assert attrs["format_version"] == 2


def _one_copy_each(idx):
    """Every tensor of the index is stored once: its boxes' bytes are its global size."""
    for t in idx["tensors"]:
        size = core.DTYPES[t["dtype"]][0]
        for s in t["shape"]:
            size *= s
        assert sum(b["nbytes"] for b in t["boxes"]) == size, t


@pytest.mark.parametrize("world", [1, 3, 4])
def test_fsdp2_checkpoint_restores_at_other_world_sizes(fsdp_runs, world, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(fsdp_runs["dir"] / "at4", run)
    layout = "plain" if world == 1 else "fsdp"
    got = train(tmp_path, f"at{world}", world, run=str(run), layout=layout, steps=6)
    want = fsdp_runs["stopped"]["digests"]["4"]
    assert got["restored_step"] == 4 and got["world"] == world
    assert got["restored"] == want  # XXH3 of full_tensor() of every parameter and moment
    assert got["step"] == 6 and os.path.isdir(run / "step-000000000006")  # training continues
    assert got["final"] != want


def test_restored_in_place_at_another_world_size_is_the_same(fsdp_runs, tmp_path):
    """check_first=False: the boxes and chunks that fit a live shard are read straight into it
    (no scratch copy of the state), with the same result."""
    run = tmp_path / "run"
    shutil.copytree(fsdp_runs["dir"] / "at4", run)
    got = train(tmp_path, "at3", 3, run=str(run), layout="fsdp", steps=6, check_first=False)
    assert got["restored_step"] == 4 and got["world"] == 3
    assert got["restored"] == fsdp_runs["stopped"]["digests"]["4"]


def _plain_model():
    import torch
    from torch import nn
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 6))


def _box_targets(model, step_dir):
    """_core.ShardRead's targets for every parameter of the plain model: the whole tensor."""
    return [(f"/model/{k}", [0] * v.dim(), list(v.shape), v.data_ptr(), v.numel() * 4, "float32")
            for k, v in model.state_dict().items()]


def test_shard_read_in_place_reads_straight_into_the_targets(fsdp_runs):
    d = str(fsdp_runs["dir"] / "at4" / STEP)
    first, placed = _plain_model(), _plain_model()
    before = {k: v.clone() for k, v in first.state_dict().items()}
    a = core.ShardRead(d, _box_targets(first, d))
    assert all(v.equal(before[k]) for k, v in first.state_dict().items())  # nothing written yet
    a.copy_out()
    b = core.ShardRead(d, _box_targets(placed, d), in_place=True)
    b.copy_out()
    # check first: every box checked by the constructor, then read again by copy_out. These
    # boxes are small: coalesced into one read, copied out of staging (a box over chunk_bytes
    # would go straight in: tests/shard/shard_read_test.cc)
    def filled(r):
        return r.stats()["bytes_in_place"] + r.stats()["bytes_copied"]
    params = sum(v.numel() * 4 for v in first.state_dict().values())
    assert filled(a) == filled(b) == params
    assert a.stats()["bytes_reread"] >= params  # padding read too
    assert b.stats()["bytes_reread"] == 0
    # a small INDEX is read whole, in one read
    assert a.stats()["index_reads"] == 1 and a.stats()["index_bytes_read"] > 64
    assert all(v.equal(placed.state_dict()[k]) for k, v in first.state_dict().items())
    assert any(not v.equal(before[k]) for k, v in first.state_dict().items())


def _restore_plain(run, check_first=True):
    """restore_latest() of the FSDP run's state into plain modules in this process (no ranks):
    the error it raises, and (check first) that no live tensor changed."""
    import torch
    from torch import nn
    import ckpt
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 6))
    before = {k: v.clone() for k, v in model.state_dict().items()}
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    with ckpt.Checkpointer(run) as ck:
        ck.track(model=model, optimizer=opt)
        with pytest.raises(ckpt.CorruptCheckpointError) as e:
            ck.restore_latest(check_first=check_first)
    same = all(torch.equal(v, before[k]) for k, v in model.state_dict().items())
    assert same == check_first, str(e.value)  # in place: rank 0's boxes were read before
    assert not opt.state  # nothing was handed to the optimizer
    return str(e.value)


def test_a_lost_rank_file_or_a_flipped_byte_is_refused_by_name(fsdp_runs, tmp_path):
    lost = tmp_path / "lost"
    shutil.copytree(fsdp_runs["dir"] / "at4", lost)
    os.remove(lost / STEP / "rank-00001.h5")
    error = _restore_plain(lost)
    assert "1 rank file missing or damaged" in error and "rank-00001.h5" in error
    assert 'tensor "/model/0.weight" loses 64 of 128 elements: [8:16, 0:8]' in error
    assert 'tensor "/optimizer/state/0/exp_avg" loses 64 of 128 elements: [8:16, 0:8]' in error

    flipped = tmp_path / "flipped"
    shutil.copytree(fsdp_runs["dir"] / "at4", flipped)
    manifest = json.loads((flipped / STEP / "rank-00001.manifest.json").read_text())
    entry = [e for e in manifest["tensors"] if e["path"] == "/model/2.weight"][0]
    with open(flipped / STEP / "rank-00001.h5", "r+b") as f:
        f.seek(entry["offset"] + 5)
        b = f.read(1)
        f.seek(entry["offset"] + 5)
        f.write(bytes([b[0] ^ 0x10]))
    error = _restore_plain(flipped)
    assert 'tensor "/model/2.weight"' in error and "rank-00001.h5" in error, error
    assert "xxh3 mismatch" in error and "nothing was restored" in error, error
    error = _restore_plain(flipped, check_first=False)
    assert "xxh3 mismatch" in error, error
    assert "restored in place: the live shards are partly overwritten" in error, error


@pytest.fixture(scope="module")
def mesh_run(tmp_path_factory):
    """4 ranks: the MLP on a 2 x 2 (dp, tp) mesh (Colwise Shard(0), Rowwise Shard(1), then
    FSDP over dp), an uneven module (17 and 3 rows over 4 ranks) and an HSDP one."""
    torch2_python()
    d = tmp_path_factory.mktemp("mesh")
    got = train(d, "mesh", 4, run=str(d / "run"), layout="fsdp_tp", steps=4, extra=True)
    return {"dir": d, "result": got}


def test_fsdp_tp_hsdp_and_uneven_shards_are_stored_once(mesh_run):
    idx = core.read_index(str(mesh_run["dir"] / "run" / STEP))
    _one_copy_each(idx)
    names = {t["name"]: t for t in idx["tensors"]}
    rows = sorted((b["offsets"][0], b["sizes"][0]) for b in names["/extra/0.weight"]["boxes"])
    assert rows == [(0, 5), (5, 5), (10, 5), (15, 2)]  # 17 rows over 4 ranks
    assert [b["sizes"][0] for b in names["/extra/1.weight"]["boxes"]] == [1, 1, 1]  # 3 over 4
    hsdp = [t for n, t in names.items() if n.startswith(("/hsdp/", "/hsdp_opt/"))]
    assert len(hsdp) == 4 + 8
    for t in hsdp:  # HSDP: shard dim 2, replicate dim 2: two boxes, not four
        assert len(t["boxes"]) == 2, t
    colwise = names["/model/0.weight"]  # TP Shard(0) then FSDP Shard(0): 4 boxes of 4 rows
    assert sorted(b["offsets"][0] for b in colwise["boxes"]) == [0, 4, 8, 12]
    rowwise = names["/model/2.weight"]  # FSDP Shard(0), TP Shard(1): 4 boxes of [3, 8]
    assert sorted(tuple(b["offsets"]) for b in rowwise["boxes"]) == [(0, 0), (0, 8), (3, 0),
                                                                      (3, 8)]
    bias = names["/model/2.bias"]  # FSDP Shard(0), TP Replicate: one owner per replica pair
    assert len(bias["boxes"]) == 2


@pytest.mark.parametrize("world", [2, 1])
def test_fsdp_tp_checkpoint_restores_fsdp_only_and_plain(mesh_run, world, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(mesh_run["dir"] / "run", run)
    layout = "plain" if world == 1 else "fsdp"
    got = train(tmp_path, f"at{world}", world, run=str(run), layout=layout, steps=5, extra=True)
    want = mesh_run["result"]["digests"]["4"]
    assert len(want) == 12 * 3  # 12 parameters, each with two moments
    assert got["restored_step"] == 4 and got["restored"] == want
    assert got["step"] == 5


def test_a_plain_checkpoint_restores_into_an_fsdp2_model(tmp_path):
    """Version 1 (one process, plain modules: whole tensors) into FSDP2 at 2 ranks: each rank
    takes its part of each whole tensor, fresh optimizer moments included."""
    torch2_python()
    run = tmp_path / "run"
    saved = train(tmp_path, "plain", 1, run=str(run), layout="plain", steps=4)
    assert core.OpenRank(str(run / STEP), 0).tree["attrs"]["format_version"] == 1
    got = train(tmp_path, "fsdp", 2, run=str(run), layout="fsdp", steps=5)
    assert got["restored_step"] == 4 and got["restored"] == saved["digests"]["4"]
    assert got["step"] == 5
