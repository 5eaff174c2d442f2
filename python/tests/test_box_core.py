"""The bindings of format version 2 (docs/format.md §8), driven by hand with plain tensors: boxes
written by several ranks of one process, the INDEX the commit builds, ShardRead at another
layout, ownership, and the refusals (a gap at commit, a lost rank file, a flipped byte)."""
import os

import pytest
import torch

import ckpt
import ckpt._core as core

ROWS, COLS = 10, 6


def _global():
    return torch.arange(ROWS * COLS, dtype=torch.float32).reshape(ROWS, COLS)


def _box(t, offsets, owner=-1, placement="sharded"):
    if owner >= 0:
        return (0, 0, "float32", [], "", [ROWS, COLS], list(offsets), placement, owner)
    return (t.data_ptr(), t.numel() * t.element_size(), "float32", list(t.shape), "",
            [ROWS, COLS], list(offsets), placement, -1)


def _save(run, step, pieces, world):
    """pieces[rank] = list of (row_begin, row_end) that rank writes of the global tensor."""
    g, keep = _global(), []
    for rank in range(world):
        tensors = {}
        for k, (a, b) in enumerate(pieces[rank]):
            t = g[a:b].contiguous()
            keep.append(t)
            tensors[f"w{k}" if k else "w"] = _box(t, [a, 0])
        if not tensors:  # an empty local shard
            t = torch.empty(0, COLS)
            tensors["w"] = _box(t, [ROWS, 0])
        tree = {"attrs": core.root_attrs(producer="test", libtorch_version="", step=step,
                                         rank=rank, world_size=world, components=["m"]),
                "tensors": {},
                "children": {"m": {"attrs": {}, "tensors": tensors, "children": {}}}}
        core.save_rank(str(run), step, rank, world, tree)
    core.commit(str(run), step, world, ["m"])
    return os.path.join(str(run), core.step_dir_name(step))


def _read(step_dir, rows):
    out = torch.full((rows[1] - rows[0], COLS), -1.0)
    sr = core.ShardRead(step_dir, [("/m/w", [rows[0], 0], [rows[1] - rows[0], COLS],
                                    out.data_ptr(), out.numel() * 4, "float32")])
    assert torch.all(out == -1)  # nothing is written before copy_out
    sr.copy_out()
    return out, sr.stats()


def test_boxes_of_two_ranks_restore_at_three(tmp_path):
    d = _save(tmp_path, 5, [[(0, 5)], [(5, 10)]], 2)
    idx = core.read_index(d)
    assert [t["name"] for t in idx["tensors"]] == ["/m/w"]
    assert [(b["file"], b["offsets"], b["sizes"]) for b in idx["tensors"][0]["boxes"]] == [
        ("rank-00000.h5", [0, 0], [5, 6]), ("rank-00001.h5", [5, 0], [5, 6])]
    g = _global()
    for rows in ((0, 4), (4, 7), (7, 10), (0, 10)):
        got, stats = _read(d, rows)
        assert torch.equal(got, g[rows[0]:rows[1]])
    # the whole tensor: each box fits the target, so it is checked, then read again into it
    assert stats["files"] == 2 and stats["bytes_copied"] == 0
    assert stats["bytes_in_place"] == stats["bytes_reread"] == ROWS * COLS * 4
    opened = core.OpenRank(d, 1)
    assert opened.tree["attrs"]["format_version"] == 2 == core.MAX_FORMAT_VERSION
    assert opened.tree["children"]["m"]["boxes"]["w"] == ([ROWS, COLS], [5, 0], "sharded", -1)
    assert "INDEX" in os.listdir(d)


def test_a_fresh_target_is_filled_while_shardread_checks(tmp_path):
    # memory allocated for the restore (a fresh optimizer's moment) holds nothing live: it is
    # written by the checking read, and copy_out reads nothing again for it
    d = _save(tmp_path, 5, [[(0, 5)], [(5, 10)]], 2)
    out = torch.full((4, COLS), -1.0)
    sr = core.ShardRead(d, [("/m/w", [3, 0], [4, COLS], out.data_ptr(), out.numel() * 4,
                             "float32", True)])
    assert torch.equal(out, _global()[3:7])
    assert sr.stats()["bytes_fresh"] == out.numel() * 4
    sr.copy_out()
    assert sr.stats()["bytes_reread"] == 0 and torch.equal(out, _global()[3:7])
    os.remove(os.path.join(d, "rank-00001.h5"))
    with pytest.raises(ckpt.CorruptCheckpointError, match="nothing was restored"):
        core.ShardRead(d, [("/m/w", [3, 0], [4, COLS], out.data_ptr(), out.numel() * 4,
                            "float32", True)])


def test_a_target_reads_only_the_files_it_overlaps(tmp_path):
    d = _save(tmp_path, 1, [[(0, 5)], [(5, 10)]], 2)
    os.remove(os.path.join(d, "rank-00001.h5"))  # rows 5..10 are lost; rows 0..5 are not
    got, stats = _read(d, (0, 5))
    assert torch.equal(got, _global()[0:5]) and stats["files"] == 1


def test_uneven_and_empty_local_shards(tmp_path):
    # 10 rows over 4 ranks as torch.chunk splits them: 3, 3, 3, 1; then 3 rows over 4: one empty
    d = _save(tmp_path, 2, [[(0, 3)], [(3, 6)], [(6, 9)], [(9, 10)]], 4)
    got, _ = _read(d, (0, 10))
    assert torch.equal(got, _global())


def test_a_replica_is_written_once_by_its_owner(tmp_path):
    g, step = _global(), 3
    owners = core.assign_owners([("/m/w", g.numel() * 4)], [0, 1], small_bytes=0)
    assert owners == core.assign_owners([("/m/w", g.numel() * 4)], [1, 0], small_bytes=0)
    for rank in range(2):
        t = g if rank == owners[0] else torch.empty(0)
        box = _box(t, [0, 0], -1 if rank == owners[0] else owners[0], "replicated")
        tree = {"attrs": core.root_attrs(producer="t", libtorch_version="", step=step, rank=rank,
                                         world_size=2, components=["m"]),
                "tensors": {}, "children": {"m": {"attrs": {}, "tensors": {"w": box},
                                                  "children": {}}}}
        core.save_rank(str(tmp_path), step, rank, 2, tree)
    core.commit(str(tmp_path), step, 2, ["m"])
    d = os.path.join(str(tmp_path), core.step_dir_name(step))
    boxes = core.read_index(d)["tensors"][0]["boxes"]
    assert len(boxes) == 1 and boxes[0]["file"] == core.rank_file_name(owners[0])
    got, _ = _read(d, (0, ROWS))
    assert torch.equal(got, g)
    other = core.OpenRank(d, 1 - owners[0]).tree["children"]["m"]["boxes"]["w"]
    assert other[3] == owners[0]


def test_commit_refuses_boxes_that_leave_a_gap(tmp_path):
    with pytest.raises(ckpt.CorruptCheckpointError, match=r"commit refused.*gap.*\[5:6, 0:6\]"):
        _save(tmp_path, 4, [[(0, 5)], [(6, 10)]], 2)
    assert not os.path.exists(os.path.join(str(tmp_path), core.step_dir_name(4), "COMMIT.json"))


def test_a_lost_rank_file_names_the_tensor_and_rows(tmp_path):
    d = _save(tmp_path, 6, [[(0, 5)], [(5, 10)]], 2)
    os.remove(os.path.join(d, "rank-00001.h5"))
    out = torch.zeros(ROWS, COLS)
    with pytest.raises(ckpt.CorruptCheckpointError,
                       match=r"1 rank file missing or damaged.*tensor \"/m/w\" loses 30 of 60 "
                             r"elements: \[5:10, 0:6\] \(rank-00001.h5\); nothing was restored"):
        core.ShardRead(d, [("/m/w", [0, 0], [ROWS, COLS], out.data_ptr(), out.numel() * 4,
                            "float32")])
    assert torch.all(out == 0)


def test_a_flipped_byte_in_a_box_is_refused(tmp_path):
    d = _save(tmp_path, 7, [[(0, 5)], [(5, 10)]], 2)
    entries = core.read_index(d)["tensors"][0]["boxes"]
    assert entries[1]["file"] == "rank-00001.h5"
    path = os.path.join(d, "rank-00001.h5")
    offset = [e for e in _manifest(d, 1) if e["path"] == "/m/w"][0]["offset"]
    with open(path, "r+b") as f:
        f.seek(offset + 7)
        b = f.read(1)
        f.seek(offset + 7)
        f.write(bytes([b[0] ^ 0x40]))
    out = torch.zeros(ROWS, COLS)
    with pytest.raises(ckpt.CorruptCheckpointError, match=r"tensor \"/m/w\" in .*rank-00001.h5: "
                                                          r"xxh3 mismatch"):
        core.ShardRead(d, [("/m/w", [0, 0], [ROWS, COLS], out.data_ptr(), out.numel() * 4,
                            "float32")])
    assert torch.all(out == 0)


def test_a_target_of_another_dtype_is_refused(tmp_path):
    d = _save(tmp_path, 8, [[(0, 5)], [(5, 10)]], 2)
    out = torch.zeros(ROWS, COLS, dtype=torch.float64)
    with pytest.raises(ckpt.MismatchError, match=r"the checkpoint has float32, the live shard "
                                                 r"float64"):
        core.ShardRead(d, [("/m/w", [0, 0], [ROWS, COLS], out.data_ptr(), out.numel() * 8,
                            "float64")])


def test_a_plain_checkpoint_has_no_index(tmp_path):
    with ckpt.Checkpointer(tmp_path) as ck:
        ck.track(w=torch.ones(3))
        ck.save(1)
    d = os.path.join(str(tmp_path), core.step_dir_name(1))
    assert "INDEX" not in os.listdir(d)
    assert core.OpenRank(d, 0).tree["attrs"]["format_version"] == 1
    with pytest.raises(ckpt.NotFoundError, match="no INDEX"):
        core.read_index(d)


def _manifest(d, rank):
    import json
    with open(os.path.join(d, f"rank-{rank:05d}.manifest.json")) as f:
        return json.load(f)["tensors"]
