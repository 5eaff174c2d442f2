"""Single-process checks of ckpt._shard's geometry and ownership grouping on simulated meshes
(torch 2.x, no process group), for test_shard_unit.py. Prints "ok" and exits 0 when every check
holds; an AssertionError's traceback otherwise."""
import torch
from torch.distributed.tensor.placement_types import Replicate, Shard, _StridedShard

from ckpt import _shard


def grid(shape):
    return list(range(int(torch.tensor(shape).prod())))


def boxes(global_shape, mesh_shape, placements):
    out = []
    n = 1
    for s in mesh_shape:
        n *= s
    for flat in range(n):
        coord, rest = [], flat
        for s in reversed(mesh_shape):
            coord.insert(0, rest % s)
            rest //= s
        out.append(_shard.local_box("/t", global_shape, mesh_shape, coord, placements))
    return out


def tiles(global_shape, mesh_shape, placements, want_copies):
    """Every element is covered by exactly want_copies boxes; each box equals torch.chunk's."""
    seen = torch.zeros(global_shape, dtype=torch.int64)
    for offsets, sizes in boxes(global_shape, mesh_shape, placements):
        sl = tuple(slice(o, o + s) for o, s in zip(offsets, sizes))
        seen[sl] += 1
    assert torch.all(seen == want_copies), (global_shape, mesh_shape, placements, seen)


# 17 rows over 4 ranks, as torch.chunk splits them: 5, 5, 5, 2
assert [b for b in boxes([17, 3], [4], [Shard(0)])] == [
    ([0, 0], [5, 3]), ([5, 0], [5, 3]), ([10, 0], [5, 3]), ([15, 0], [2, 3])]
# 3 rows over 4 ranks: one empty local shard
assert [b[1][0] for b in boxes([3, 2], [4], [Shard(0)])] == [1, 1, 1, 0]
tiles([17, 3], [4], [Shard(0)], 1)
tiles([6, 16], [2, 2], [Shard(0), Shard(1)], 1)
tiles([6], [2, 2], [Shard(0), Replicate()], 2)
tiles([16, 8], [2, 2], [_StridedShard(0, split_factor=2), Shard(0)], 1)  # FSDP2 + TP colwise
tiles([5, 4], [2, 2], [Replicate(), Shard(0)], 2)  # HSDP
# FSDP2 + TP: rank (dp, tp) holds rows tp * 8 + dp * 4 .. + 4 (TP first, then FSDP inside)
assert boxes([16, 8], [2, 2], [_StridedShard(0, split_factor=2), Shard(0)]) == [
    ([0, 0], [4, 8]), ([8, 0], [4, 8]), ([4, 0], [4, 8]), ([12, 0], [4, 8])]
# a layout whose local shard is two pieces is refused by name
try:
    _shard.local_box("/x", [8], [2, 2], [0, 0], [Shard(0), _StridedShard(0, split_factor=2)])
    raise SystemExit("a non-box local shard was accepted")
except Exception as e:  # noqa: BLE001
    assert "/x" in str(e) and "not one box" in str(e), e

# candidates: the ranks with my coordinate on every dimension that shards
ranks = [10, 11, 12, 13]  # global ranks of a 2 x 2 mesh
assert _shard.candidates([2, 2], [1, 0], ranks, [Shard(0), Replicate()]) == [12, 13]
assert _shard.candidates([2, 2], [1, 0], ranks, [Replicate(), Shard(0)]) == [10, 12]
assert _shard.candidates([2, 2], [1, 0], ranks, [Replicate(), Replicate()]) == ranks
assert _shard.candidates([2, 2], [1, 0], ranks, [Shard(0), Shard(1)]) == [12]
assert _shard.placement_kind([Replicate(), Shard(0)]) == "sharded"
assert _shard.placement_kind([Replicate()]) == "replicated"
print("ok")
