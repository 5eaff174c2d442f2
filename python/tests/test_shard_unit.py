"""ckpt._shard's geometry and ownership grouping (shard_unit.py, under torch 2.x), and
ResumableLoader's data-parallel rank from a mesh dimension (any torch: a mesh is duck-typed)."""
import subprocess

import pytest
import torch

import ckpt
from ckpt.loader import mesh_dp
from conftest import BUILD
from shard_harness import HERE, torch2_python


def test_local_boxes_and_candidates_on_simulated_meshes():
    py = torch2_python()
    p = subprocess.run([py, str(HERE / "shard_unit.py")], capture_output=True, text=True,
                       env={"PYTHONPATH": str(BUILD / "python"), "PYTHONWARNINGS": "ignore"},
                       timeout=300)
    assert p.returncode == 0 and p.stdout.strip().endswith("ok"), p.stdout + p.stderr


class Mesh:
    """What ResumableLoader reads of a DeviceMesh."""

    def __init__(self, shape, names, coord):
        self.mesh = torch.arange(int(torch.tensor(shape).prod())).reshape(shape)
        self.mesh_dim_names = names
        self._coord = coord

    def get_coordinate(self):
        return self._coord


def test_the_loader_takes_its_rank_from_the_mesh_dimension():
    mesh = Mesh((2, 2), ("dp", "tp"), [1, 0])
    assert mesh_dp(mesh, "dp") == (2, 1)
    assert mesh_dp(Mesh((2, 2), ("dp", "tp"), [1, 1]), "dp") == (2, 1)  # the same TP group
    assert mesh_dp(Mesh((2, 3, 2), ("rep", "shard", "tp"), [1, 2, 0]), ("rep", "shard")) == (6, 5)
    assert mesh_dp(Mesh((4,), ("dp",), [3]), None) == (4, 3)
    with pytest.raises(ckpt.InvalidArgumentError, match="dp_dim 'data' is not a dimension"):
        mesh_dp(mesh, "data")
    with pytest.raises(ckpt.InvalidArgumentError, match="say which is data-parallel"):
        mesh_dp(mesh, None)
    data = list(range(40))
    a = ckpt.ResumableLoader(data, batch_size=4, seed=2, mesh=mesh, dp_dim="dp")
    b = ckpt.ResumableLoader(data, batch_size=4, seed=2, mesh=Mesh((2, 2), ("dp", "tp"), [1, 1]),
                             dp_dim="dp")
    c = ckpt.ResumableLoader(data, batch_size=4, seed=2, world_size=2, rank=1)
    first = [x.tolist() for x in a]
    assert first == [x.tolist() for x in b] == [x.tolist() for x in c]
    assert (a.world_size, a.rank) == (2, 1)
    with pytest.raises(ckpt.InvalidArgumentError, match="not both"):
        ckpt.ResumableLoader(data, batch_size=4, mesh=mesh, dp_dim="dp", rank=0)


def test_ddp_modules_declared_components_and_their_optimizers_are_replicated():
    from ckpt._shard import replicated_components
    model, other = torch.nn.Linear(4, 4), torch.nn.Linear(4, 2)
    objects = {"model": model, "optimizer": torch.optim.AdamW(model.parameters()),
               "both": torch.optim.SGD([*model.parameters(), *other.parameters()], lr=0.1),
               "other_opt": torch.optim.SGD(other.parameters(), lr=0.1), "other": other}
    got = replicated_components(objects, {"model"}, 3)
    assert {n: r.ranks for n, r in got.items()} == {"model": [0, 1, 2], "optimizer": [0, 1, 2]}
    assert got["model"].holds(model.weight) and got["optimizer"].holds(other.weight)
    bn = torch.nn.BatchNorm1d(4)  # parameters alike, running statistics per rank
    norm = replicated_components({"bn": bn}, {"bn"}, 2)["bn"]
    assert norm.holds(bn.weight) and not norm.holds(bn.running_mean)
    assert replicated_components(objects, {"model"}, 1) == {}  # one process: nothing to share
    assert replicated_components(objects, set(), 3) == {}  # plain modules stay per rank


def test_an_unknown_replicated_component_is_refused(tmp_path):
    with ckpt.Checkpointer(tmp_path / "run", replicated=("modle",)) as ck:
        ck.track(model=torch.nn.Linear(2, 2))
        with pytest.raises(ckpt.errors.InvalidArgumentError, match="replicated: unknown "
                           "component 'modle'"):
            ck.save(1)
