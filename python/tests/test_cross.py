"""Checkpoints read across the Python package and the C++ Checkpointer (tests/cross/ckpt_cross,
built with libtorch): a C++ program restores a Python-written checkpoint and Python restores a
C++-written one — model, AdamW state, the CPU generator, the loader cursor, the train counters —
bit-exact on tensors. Both checkpoints are written here, at test time."""
import json
import subprocess

import pytest
import torch
from torch import nn

import ckpt
from conftest import BUILD

CROSS = BUILD / "tests" / "cross" / "ckpt_cross"
pytestmark = pytest.mark.skipif(not CROSS.exists(),
                                reason=f"{CROSS} not built (a build without libtorch)")


class Data(torch.utils.data.Dataset):
    def __len__(self):
        return 40

    def __getitem__(self, i):
        return torch.full((4,), float(i))


def objects(seed):
    torch.manual_seed(seed)
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    loader = ckpt.ResumableLoader(Data(), batch_size=4, seed=7)
    return model, opt, loader


def names(model):
    return [n for n, _ in model.named_parameters()]


def test_cpp_reads_a_python_checkpoint(tmp_path):
    model, opt, loader = objects(5)
    it = iter(loader)
    for _ in range(3):
        x = next(it)
        opt.zero_grad()
        model(x).pow(2).mean().backward()
        opt.step()
    with ckpt.Checkpointer(tmp_path / "run") as ck:
        ck.track(model=model, optimizer=opt, loader=loader)
        rng = torch.get_rng_state()
        ck.save(3)
    out = tmp_path / "cpp.json"
    p = subprocess.run([str(CROSS), "read", str(tmp_path / "run"), str(out)],
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stdout + p.stderr
    got = json.loads(out.read_text())
    assert got["components"] == ["model", "optimizer", "rng", "loader", "train"], got
    assert got["missing"] == []
    for n, t in model.named_parameters():
        assert got["model"][n] == t.detach().numpy().tobytes().hex(), n
    state = opt.state_dict()["state"]
    for i, n in enumerate(names(model)):
        for k in ("exp_avg", "exp_avg_sq"):
            assert got["optimizer"][n][k] == state[i][k].numpy().tobytes().hex(), (n, k)
        assert got["optimizer"][n]["step"] == 3
    assert got["lr"] == opt.param_groups[0]["lr"]
    assert got["rng_cpu"] == rng.numpy().tobytes().hex()
    assert got["loader"] == {"epoch": 0, "position": 12}
    assert got["train"] == {"global_step": 3, "epoch": 0, "samples_seen": 12}


def test_python_reads_a_cpp_checkpoint(tmp_path):
    out = tmp_path / "cpp.json"
    p = subprocess.run([str(CROSS), "write", str(tmp_path / "run"), str(out)],
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stdout + p.stderr
    saved = json.loads(out.read_text())
    model, opt, loader = objects(99)
    with ckpt.Checkpointer(tmp_path / "run") as ck:
        ck.track(model=model, optimizer=opt, loader=loader)
        rep = ck.restore_latest()
        rng = torch.get_rng_state()  # before anything else draws
    assert rep.restored and rep.step == saved["train"]["global_step"] == 3
    assert sorted(rep.components) == ["loader", "model", "optimizer", "rng"], rep
    for n, t in model.named_parameters():
        assert t.detach().numpy().tobytes().hex() == saved["model"][n], n
    state = opt.state_dict()["state"]
    for i, n in enumerate(names(model)):
        for k in ("exp_avg", "exp_avg_sq"):
            assert state[i][k].numpy().tobytes().hex() == saved["optimizer"][n][k], (n, k)
        assert int(state[i]["step"]) == saved["optimizer"][n]["step"] == 3
    assert opt.param_groups[0]["lr"] == saved["lr"]
    assert rng.numpy().tobytes().hex() == saved["rng_cpu"]
    assert loader.cursor() == (saved["loader"]["epoch"], saved["loader"]["position"]) == (0, 12)
    # the restored optimizer steps exactly as the uninterrupted C++ one would: same update rule
    x = torch.randn(4, 4)
    opt.zero_grad()
    model(x).pow(2).mean().backward()
    opt.step()
    assert int(opt.state_dict()["state"][0]["step"]) == 4


class Tied(nn.Module):
    """The Python twin of ckpt_cross's tied model: proj_weight is emb.weight."""

    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(10, 4)
        self.proj_weight = self.emb.weight


def test_tied_weights_across_cpp_and_python(tmp_path):
    out = tmp_path / "tied.json"
    p = subprocess.run([str(CROSS), "tied", str(tmp_path / "run"), str(out)],
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stdout + p.stderr
    got = json.loads(out.read_text())
    assert got["equal"] and got["still_tied"], got
    torch.manual_seed(8)
    m = Tied()
    with ckpt.Checkpointer(tmp_path / "run") as ck:
        ck.track(model=m)
        rep = ck.restore_latest()
    assert rep.restored and m.proj_weight is m.emb.weight
    assert m.emb.weight.detach().numpy().tobytes().hex() == got["model"]["emb.weight"]
