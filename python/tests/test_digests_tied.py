"""The train component's config and environment digests (as the C++ Checkpointer records them),
and tied tensors stored once with alias_of and restored tied."""
import json
import pathlib

import h5py
import torch
from torch import nn

import ckpt
import ckpt._core as core


def _rank0(run_dir, step):
    return h5py.File(pathlib.Path(run_dir) / f"step-{step:012d}" / "rank-00000.h5", "r")


def test_config_and_environment_digests_are_saved(tmp_path):
    model = nn.Linear(2, 2)
    cfg = {"lr": 0.1, "steps": 120, "name": "exp1"}
    with ckpt.Checkpointer(tmp_path / "a") as ck:
        ck.config = cfg
        ck.track(model=model)
        ck.save(1)
    with ckpt.Checkpointer(tmp_path / "b") as ck:
        ck.config = dict(cfg, lr=0.2)
        ck.track(model=model)
        ck.save(1)
    with _rank0(tmp_path / "a", 1) as fa, _rank0(tmp_path / "b", 1) as fb:
        ta, tb = dict(fa["train"].attrs), dict(fb["train"].attrs)
    canonical = json.dumps(cfg, sort_keys=True, separators=(",", ":")).encode()
    assert ta["config_digest"] == core.xxh3_hex(canonical)
    assert tb["config_digest"] != ta["config_digest"]
    env = json.loads(ta["env"])
    assert env["libtorch"] == torch.__version__
    assert set(env) >= {"libtorch", "cuda_available", "cuda_devices", "cuda_runtime", "host"}
    assert ta["env_digest"] == core.xxh3_hex(ta["env"].encode())
    assert len(ta["env_digest"]) == 16 and ta["env_digest"] == tb["env_digest"]


class TiedLM(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(50, 8)
        self.body = nn.Linear(8, 8)
        self.head = nn.Linear(8, 50, bias=False)
        self.head.weight = self.emb.weight  # tied embedding / output layer

    def forward(self, x):
        return self.head(torch.tanh(self.body(self.emb(x))))


def test_tied_weights_are_stored_once_and_restored_tied(tmp_path):
    torch.manual_seed(0)
    src = TiedLM()
    opt = torch.optim.AdamW(src.parameters(), lr=1e-2)
    for _ in range(3):
        opt.zero_grad()
        src(torch.randint(0, 50, (4, 5))).logsumexp(-1).mean().backward()
        opt.step()
    with ckpt.Checkpointer(tmp_path) as ck:
        ck.track(model=src, optimizer=opt)
        ck.save(3)
    step_dir = tmp_path / "step-000000000003"
    with h5py.File(step_dir / "rank-00000.h5", "r") as f:
        head, emb = f["model"]["head.weight"], f["model"]["emb.weight"]
        assert head.attrs["alias_of"] == "/model/emb.weight"
        assert head.size == 0 and emb.shape == (50, 8)
    manifest = json.loads((step_dir / "rank-00000.manifest.json").read_text())
    paths = [t["path"] for t in manifest["tensors"]]
    assert "/model/emb.weight" in paths and "/model/head.weight" not in paths
    assert core.verify(str(step_dir)) == []

    torch.manual_seed(1)
    dst = TiedLM()
    dst_opt = torch.optim.AdamW(dst.parameters(), lr=1e-2)
    with ckpt.Checkpointer(tmp_path) as ck:
        ck.track(model=dst, optimizer=dst_opt)
        rep = ck.restore_latest()
    assert rep.restored and rep.step == 3
    assert dst.head.weight is dst.emb.weight  # still one parameter
    for (na, a), (nb, b) in zip(src.state_dict().items(), dst.state_dict().items()):
        assert na == nb and torch.equal(a, b), na
    x = torch.randint(0, 50, (2, 5))
    assert torch.equal(src(x), dst(x))
