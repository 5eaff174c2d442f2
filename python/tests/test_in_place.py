"""restore_latest reads modules and optimizers straight into their live tensors, after every
hash was checked (check first): the live memory is reused, a damaged file changes nothing, and a
module that customises loading still goes through load_state_dict."""
import json
import pathlib

import pytest
import torch
from torch import nn

import ckpt


def make(seed):
    torch.manual_seed(seed)
    model = nn.Sequential(nn.Linear(16, 32), nn.BatchNorm1d(32), nn.ReLU(), nn.Linear(32, 4))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    return model, opt


def train(model, opt, steps=3):
    torch.manual_seed(7)
    for _ in range(steps):
        opt.zero_grad()
        model(torch.randn(8, 16)).pow(2).mean().backward()
        opt.step()


def saved_run(tmp_path):
    model, opt = make(0)
    train(model, opt)
    with ckpt.Checkpointer(tmp_path) as ck:
        ck.track(model=model, optimizer=opt)
        ck.save(3)
    return model, opt


def ptrs(model):
    return {k: v.data_ptr() for k, v in model.state_dict().items()}


def test_modules_are_restored_into_their_own_memory(tmp_path, monkeypatch):
    src, src_opt = saved_run(tmp_path)
    model, opt = make(1)
    train(model, opt, 1)  # the live optimizer holds state already
    before = ptrs(model)
    calls = []
    original = nn.Module.load_state_dict
    monkeypatch.setattr(nn.Module, "load_state_dict",
                        lambda self, *a, **k: calls.append(type(self)) or original(self, *a, **k))
    with ckpt.Checkpointer(tmp_path) as ck:
        ck.track(model=model, optimizer=opt)
        rep = ck.restore_latest()
    assert rep.restored and rep.step == 3
    assert ptrs(model) == before  # read in place: no tensor was replaced
    assert calls == []  # nothing to copy onto itself: load_state_dict skipped
    for k, v in src.state_dict().items():
        assert torch.equal(model.state_dict()[k], v), k
    for a, b in zip(src_opt.state_dict()["state"].values(), opt.state_dict()["state"].values()):
        assert all(torch.equal(torch.as_tensor(a[k]), torch.as_tensor(b[k])) for k in a)
    train(src, src_opt, 2), train(model, opt, 2)  # and they train on identically
    assert all(torch.equal(a, b) for a, b in zip(src.parameters(), model.parameters()))


def test_a_module_with_a_load_hook_goes_through_load_state_dict(tmp_path):
    saved_run(tmp_path)
    model, opt = make(1)
    seen = []
    model[1]._register_load_state_dict_pre_hook(lambda sd, prefix, *a: seen.append(prefix))
    with ckpt.Checkpointer(tmp_path) as ck:
        ck.track(model=model, optimizer=opt)
        assert ck.restore_latest().restored
    assert seen == ["1."]


def flip_model_byte(tmp_path, padding):
    step = pathlib.Path(tmp_path) / "step-000000000003"
    man = json.loads((step / "rank-00000.manifest.json").read_text())
    if padding:
        ext = sorted((t["offset"], t["offset"] + t["nbytes"]) for t in man["tensors"]
                     if t["nbytes"])
        at = next(end for (_, end), (nxt, _) in zip(ext, ext[1:]) if nxt > end)
    else:  # the model's last tensor in the file: every other one was read before it
        t = max((t for t in man["tensors"] if t["path"].startswith("/model/") and t["nbytes"]),
                key=lambda t: t["offset"])
        at = t["offset"] + t["nbytes"] - 1
    data = bytearray((step / "rank-00000.h5").read_bytes())
    data[at] ^= 0x04
    (step / "rank-00000.h5").write_bytes(bytes(data))


@pytest.mark.parametrize("padding", [False, True])
@pytest.mark.parametrize("fresh_optimizer", [False, True])
def test_a_damaged_file_changes_no_live_tensor(tmp_path, padding, fresh_optimizer):
    # A fresh optimizer's moments are read while the hashes are checked (nothing live is in
    # their memory), the model's only after: a damaged model tensor still changes nothing.
    saved_run(tmp_path)
    flip_model_byte(tmp_path, padding)
    model, opt = make(1)
    if not fresh_optimizer:
        train(model, opt, 1)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    opt_before = [{k: torch.as_tensor(v).clone() for k, v in s.items()}
                  for s in opt.state_dict()["state"].values()]
    with ckpt.Checkpointer(tmp_path) as ck:
        ck.track(model=model, optimizer=opt)
        with pytest.raises(ckpt.CorruptCheckpointError, match="xxh3 mismatch"):
            ck.restore_latest()
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
    for a, b in zip(opt_before, opt.state_dict()["state"].values()):
        assert all(torch.equal(a[k], torch.as_tensor(b[k])) for k in a)
    assert bool(opt.state) != fresh_optimizer


def test_a_fresh_optimizer_is_restored_bit_exact_by_the_check_read(tmp_path):
    src, src_opt = saved_run(tmp_path)
    model, opt = make(1)
    assert not opt.state
    with ckpt.Checkpointer(tmp_path) as ck:
        ck.track(model=model, optimizer=opt)
        assert ck.restore_latest().restored
    for a, b in zip(src_opt.state_dict()["state"].values(), opt.state_dict()["state"].values()):
        assert all(torch.equal(torch.as_tensor(a[k]), torch.as_tensor(b[k])) for k in a)
    train(src, src_opt, 2), train(model, opt, 2)
    assert all(torch.equal(a, b) for a, b in zip(src.parameters(), model.parameters()))


@pytest.mark.parametrize("malloc_free", [0, 1 << 40])
def test_a_fresh_optimizers_large_moments_get_huge_page_memory_unless_malloc_has_it(
        tmp_path, monkeypatch, malloc_free):
    """A moment of at least 2 MiB is allocated in the core's memory (huge pages advised: 2 MiB
    aligned, owned by the tensor) when malloc holds less free memory than it needs, else by
    torch.empty; either way restored bit-exact, and training goes on identically."""
    from ckpt import _core, _memory

    def big(seed):
        torch.manual_seed(seed)
        model = nn.Sequential(nn.Linear(1024, 768), nn.ReLU(), nn.Linear(768, 4))  # 3 MiB
        return model, torch.optim.AdamW(model.parameters(), lr=1e-3)

    def step(model, opt):
        torch.manual_seed(7)
        opt.zero_grad()
        model(torch.randn(4, 1024)).pow(2).mean().backward()
        opt.step()

    src, src_opt = big(0)
    step(src, src_opt)
    with ckpt.Checkpointer(tmp_path) as ck:
        ck.track(model=src, optimizer=src_opt)
        ck.save(1)
    monkeypatch.setattr(_core, "prefer_host_memory",
                        lambda n, real=_core.prefer_host_memory: real(n, malloc_free))
    calls = []
    monkeypatch.setattr(_core, "host_tensor_capsule",
                        lambda n, real=_core.host_tensor_capsule: calls.append(n) or real(n))
    model, opt = big(1)
    with ckpt.Checkpointer(tmp_path) as ck:
        ck.track(model=model, optimizer=opt)
        assert ck.restore_latest().restored
    moments = [v for st in opt.state.values() for k, v in st.items() if k != "step"]
    large = [m for m in moments if m.numel() * m.element_size() >= 2 << 20]
    assert len(large) == 2  # exp_avg and exp_avg_sq of the first weight
    if malloc_free == 0 and _core.huge_pages_enabled():
        assert sorted(calls) == [3 << 20, 3 << 20]
        assert all(m.data_ptr() % (2 << 20) == 0 for m in large)
    else:
        assert calls == []
    assert _memory.empty([3, 5], torch.bfloat16).shape == (3, 5)
    for a, b in zip(src_opt.state_dict()["state"].values(), opt.state_dict()["state"].values()):
        assert all(torch.equal(torch.as_tensor(a[k]), torch.as_tensor(b[k])) for k in a)
    step(src, src_opt), step(model, opt)
    assert all(torch.equal(a, b) for a, b in zip(src.parameters(), model.parameters()))


def test_check_first_false_restores_the_same_in_one_read(tmp_path):
    src, src_opt = saved_run(tmp_path)
    model, opt = make(1)
    before = ptrs(model)
    with ckpt.Checkpointer(tmp_path) as ck:
        ck.track(model=model, optimizer=opt)
        assert ck.restore_latest(check_first=False).restored
    assert ptrs(model) == before
    for k, v in src.state_dict().items():
        assert torch.equal(model.state_dict()[k], v), k
    train(src, src_opt, 2), train(model, opt, 2)
    assert all(torch.equal(a, b) for a, b in zip(src.parameters(), model.parameters()))


def test_check_first_false_still_refuses_a_damaged_tensor_and_says_what_it_wrote(tmp_path):
    saved_run(tmp_path)
    flip_model_byte(tmp_path, padding=False)  # the model's last tensor: the others came first
    model, opt = make(1)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    with ckpt.Checkpointer(tmp_path) as ck:
        ck.track(model=model, optimizer=opt)
        with pytest.raises(ckpt.CorruptCheckpointError,
                           match="xxh3 mismatch.*check_first=False: the live tensors read "
                                 "before the error stay overwritten"):
            ck.restore_latest(check_first=False)
    assert any(not torch.equal(before[k], v) for k, v in model.state_dict().items())
    assert not opt.state  # nothing was handed to the optimizer


def test_optimizer_groups_that_do_not_fit_are_refused_before_any_byte(tmp_path):
    saved_run(tmp_path)
    model, _ = make(1)
    opt = torch.optim.AdamW([{"params": model[0].parameters()},
                             {"params": list(model[1].parameters()) +
                              list(model[3].parameters())}], lr=1e-3)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    with ckpt.Checkpointer(tmp_path) as ck:
        ck.track(model=model, optimizer=opt)
        with pytest.raises(ckpt.MismatchError, match=r"parameter groups of \[6\] parameters, "
                                                     r"the live one \[2, 4\]"):
            ck.restore_latest()
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())


def state_ptrs(opt):
    return {(i, k): v.data_ptr() for i, s in enumerate(opt.state.values())
            for k, v in s.items() if isinstance(v, torch.Tensor)}


def test_optimizer_moments_stay_in_their_own_memory_and_groups_are_loaded(tmp_path):
    # load_state_dict still runs (hyperparameters, state keyed by the live parameters), but
    # torch 1.13's deepcopy of every moment is not made: the live tensors were read into.
    src, src_opt = saved_run(tmp_path)
    model, opt = make(1)
    train(model, opt, 1)
    for g in opt.param_groups:
        g["lr"] = 0.5  # restored from the checkpoint's groups
    before = state_ptrs(opt)
    with ckpt.Checkpointer(tmp_path) as ck:
        ck.track(model=model, optimizer=opt)
        assert ck.restore_latest().restored
    assert state_ptrs(opt) == before
    assert [g["lr"] for g in opt.param_groups] == [g["lr"] for g in src_opt.param_groups]
    assert all(p in opt.state for p in model.parameters())  # keyed by the live parameters
    for a, b in zip(src_opt.state.values(), opt.state.values()):
        assert a.keys() == b.keys()
        assert all(torch.equal(torch.as_tensor(a[k]), torch.as_tensor(b[k])) for k in a)
    train(src, src_opt, 2), train(model, opt, 2)
    assert all(torch.equal(a, b) for a, b in zip(src.parameters(), model.parameters()))


def test_handed_over_state_shares_tensors_and_copies_containers():
    from ckpt.checkpointer import _Handover
    import copy
    t = torch.ones(3)
    inner = {"exp_avg": t, "betas": [0.9, 0.99]}
    sd = _Handover({"state": {0: inner, 1: inner}, "param_groups": [{"lr": 1e-3, "params": [0]}]})
    got = copy.deepcopy(sd)
    assert type(got) is dict
    assert got["state"][0]["exp_avg"] is t  # shared, not copied
    assert got["state"][0] is not inner and got["state"][0] is got["state"][1]  # sharing kept
    assert got["state"][0]["betas"] == [0.9, 0.99] and got["state"][0]["betas"] is not inner["betas"]
    got["param_groups"][0]["lr"] = 1.0
    assert sd["param_groups"][0]["lr"] == 1e-3


def test_a_dataset_header_that_disagrees_with_the_manifest_changes_nothing(tmp_path):
    # The restore takes the datasets' descriptions from the manifest and checks every other
    # byte of the file (their HDF5 headers among them) against COMMIT.json before writing.
    saved_run(tmp_path)
    step = pathlib.Path(tmp_path) / "step-000000000003"
    man = json.loads((step / "rank-00000.manifest.json").read_text())
    entry = next(t for t in man["tensors"] if t["path"] == "/model/0.weight")
    data = bytearray((step / "rank-00000.h5").read_bytes())
    at = data.find(entry["xxh3"].encode())
    assert at > 0
    data[at] = ord("1") if data[at] == ord("0") else ord("0")
    (step / "rank-00000.h5").write_bytes(bytes(data))
    model, opt = make(1)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    with ckpt.Checkpointer(tmp_path) as ck:
        ck.track(model=model, optimizer=opt)
        with pytest.raises(ckpt.CorruptCheckpointError, match="outside every tensor"):
            ck.restore_latest()
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())


def test_an_opened_rank_is_read_once(tmp_path):
    from ckpt import _core
    saved_run(tmp_path)
    opened = _core.OpenRank(str(pathlib.Path(tmp_path) / "step-000000000003"), 0)
    assert "model" in opened.tree["children"]
    opened.read_into({}, False)
    with pytest.raises(ValueError, match="read_into was called on this rank before"):
        opened.read_into({}, False)
