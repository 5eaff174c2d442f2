"""In-process tests of ckpt's Python layer: state-dict trees, errors, the resumable loader."""
import json
import math
import pathlib
import random
import subprocess
import sys

import numpy as np
import pytest
import torch
from torch import nn

import ckpt
import ckpt._core as core


class Thing:
    """A user object with a state_dict of every storable kind, and one that is not."""

    def __init__(self):
        self.state = {"b": True, "i": -3, "big": 2**62, "f": 0.25, "s": "hi", "none": None,
                      "bytes": b"\x00\x01xyz", "ints": [1, 2, 3], "floats": (0.5, 1.5),
                      "strs": ["a", "b"], "empty": [], "mixed": [1, "a", None, {"k": 2.0}],
                      "nested": {"t": torch.arange(6, dtype=torch.int32).reshape(2, 3)},
                      "intkeys": {0: {"m": torch.ones(2)}, 5: {"m": torch.zeros(2)}},
                      "fn": lambda x: x, "half": torch.tensor([1.5], dtype=torch.bfloat16)}

    def state_dict(self):
        return self.state

    def load_state_dict(self, sd):
        self.loaded = sd


def test_every_storable_kind_round_trips_and_callables_are_skipped(tmp_path):
    src = Thing()
    with ckpt.Checkpointer(tmp_path) as ck:
        ck.track(thing=src)
        ck.save(1)
    dst = Thing()
    fn = dst.state["fn"]
    with ckpt.Checkpointer(tmp_path) as ck:
        ck.track(thing=dst)
        rep = ck.restore_latest()
    assert rep.restored and rep.step == 1 and rep.components == ["thing", "rng"]
    assert rep.skipped == ["/thing/fn"]
    got = dst.loaded
    assert got["fn"] is fn  # kept from the live object
    for k in ("b", "i", "big", "f", "s", "none", "bytes", "ints", "floats", "strs", "empty"):
        assert got[k] == src.state[k] and type(got[k]) is type(src.state[k]), k
    assert got["mixed"] == [1, "a", None, {"k": 2.0}]
    assert torch.equal(got["nested"]["t"], src.state["nested"]["t"])
    assert got["nested"]["t"].dtype == torch.int32
    assert sorted(got["intkeys"]) == [0, 5] and torch.equal(got["intkeys"][0]["m"], torch.ones(2))
    assert got["half"].dtype == torch.bfloat16 and got["half"].item() == 1.5


def test_rng_is_restored_before_anything_else(tmp_path):
    torch.manual_seed(1), random.seed(2), np.random.seed(3)
    with ckpt.Checkpointer(tmp_path) as ck:
        ck.track(w=torch.zeros(3))
        ck.save(5)
    want = (torch.rand(4), random.random(), np.random.rand())
    torch.manual_seed(9), random.seed(9), np.random.seed(9)
    with ckpt.Checkpointer(tmp_path) as ck:
        ck.track(w=torch.zeros(3))
        assert ck.restore_latest().components == ["w", "rng"]
    got = (torch.rand(4), random.random(), np.random.rand())
    assert torch.equal(got[0], want[0]) and got[1:] == want[1:]


def test_plain_tensor_and_value(tmp_path):
    w, scale = torch.tensor([1.0, 2.0]), ckpt.Value(0.25)
    with ckpt.Checkpointer(tmp_path) as ck:
        ck.track(w=w, lr_scale=scale)
        scale.value = 0.5  # what save() stores is the value at the save, not at track()
        ck.save(3)
    w2, scale2 = torch.zeros(2), ckpt.Value(1.0)
    with ckpt.Checkpointer(tmp_path) as ck:
        ck.track(w=w2, lr_scale=scale2)
        ck.restore_latest()
        assert scale2.value == 0.5 and ck.value("lr_scale") == 0.5
    assert torch.equal(w2, w)


def test_shape_mismatch_is_refused_naming_the_key_and_nothing_changes(tmp_path):
    with ckpt.Checkpointer(tmp_path) as ck:
        ck.track(model=nn.Linear(4, 3), extra=torch.ones(2))
        ck.save(1)
    model, extra = nn.Linear(4, 2), torch.zeros(2)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    with ckpt.Checkpointer(tmp_path) as ck:
        ck.track(extra=extra, model=model)
        msg = r"^/model/bias: the checkpoint has float32\[3\], the live object has float32\[2\]$"
        with pytest.raises(ckpt.MismatchError, match=msg):
            ck.restore_latest()
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
    assert torch.equal(extra, torch.zeros(2))


def test_flipped_byte_is_refused_naming_the_tensor(tmp_path):
    torch.manual_seed(0)
    with ckpt.Checkpointer(tmp_path) as ck:
        ck.track(model=nn.Linear(64, 64), w=torch.ones(8))
        ck.save(1)
    step = pathlib.Path(tmp_path) / "step-000000000001"
    man = json.loads((step / "rank-00000.manifest.json").read_text())
    t = next(t for t in man["tensors"] if t["path"] == "/model/weight")
    data = bytearray((step / "rank-00000.h5").read_bytes())
    data[t["offset"] + 100] ^= 0x10
    (step / "rank-00000.h5").write_bytes(bytes(data))
    model, w = nn.Linear(64, 64), torch.zeros(8)
    before = model.weight.detach().clone()
    with ckpt.Checkpointer(tmp_path) as ck:
        ck.track(model=model, w=w)
        with pytest.raises(ckpt.CorruptCheckpointError, match="/model/weight"):
            ck.restore_latest()
    assert torch.equal(model.weight, before) and torch.equal(w, torch.zeros(8))
    assert core.verify(str(step))  # the C++ verifier sees it too


def test_flipped_padding_byte_fails_the_whole_file_hash_naming_the_file(tmp_path):
    with ckpt.Checkpointer(tmp_path) as ck:
        ck.track(model=nn.Linear(64, 64))
        ck.save(1)
    step = pathlib.Path(tmp_path) / "step-000000000001"
    man = json.loads((step / "rank-00000.manifest.json").read_text())
    ext = sorted((t["offset"], t["offset"] + t["nbytes"]) for t in man["tensors"] if t["nbytes"])
    pad = next(end for (_, end), (nxt, _) in zip(ext, ext[1:]) if nxt > end)
    data = bytearray((step / "rank-00000.h5").read_bytes())
    data[pad] ^= 0x01  # alignment padding: no tensor's own hash covers it
    (step / "rank-00000.h5").write_bytes(bytes(data))
    with ckpt.Checkpointer(tmp_path) as ck:
        ck.track(model=nn.Linear(64, 64))
        with pytest.raises(ckpt.CorruptCheckpointError, match="rank-00000.h5: whole-file xxh3"):
            ck.restore_latest()


def test_names_and_required_and_lock(tmp_path):
    with ckpt.Checkpointer(tmp_path / "fresh", required=("model",)) as ck:
        ck.track(model=nn.Linear(2, 2))
        rep = ck.restore_latest()  # a fresh start is not a missing component
        assert not rep.restored and rep.step == 0 and rep.components == []
    with ckpt.Checkpointer(tmp_path, omit=("shceduler",)) as ck:
        ck.track(model=nn.Linear(2, 2))
        with pytest.raises(ValueError, match="shceduler"):
            ck.save(1)
    with ckpt.Checkpointer(tmp_path, required=("nope",)) as ck:
        ck.track(model=nn.Linear(2, 2))
        with pytest.raises(ValueError, match="nope"):
            ck.restore_latest()
    with ckpt.Checkpointer(tmp_path) as ck:
        ck.track(model=nn.Linear(2, 2))
        ck.save(1)
        # another process cannot take the run while this one holds it
        other = subprocess.run([sys.executable, "-c", f"import ckpt; ckpt.Checkpointer({str(tmp_path)!r})"],
                               capture_output=True, text=True)
        assert other.returncode != 0 and "ckpt.errors.LockedError" in other.stderr, other.stderr
        assert "LOCK: locked by pid" in other.stderr
    with ckpt.Checkpointer(tmp_path, required=("opt",)) as ck:
        ck.track(model=nn.Linear(2, 2), opt=torch.optim.SGD(nn.Linear(2, 2).parameters(), 0.1))
        with pytest.raises(ckpt.MissingRequiredError, match='required component "opt"'):
            ck.restore_latest()
    with ckpt.Checkpointer(tmp_path) as ck:
        ck.track(model=nn.Linear(2, 2), opt=torch.optim.SGD(nn.Linear(2, 2).parameters(), 0.1))
        rep = ck.restore_latest()
        assert rep.missing == ["opt"] and rep.components == ["model", "rng"]


def test_retention_keeps_the_newest(tmp_path):
    with ckpt.Checkpointer(tmp_path, keep_last=2, keep_every=4) as ck:
        ck.track(w=torch.ones(1))
        for s in range(1, 8):
            ck.save(s)
    names = sorted(p.name for p in pathlib.Path(tmp_path).glob("step-*"))
    assert names == ["step-000000000004", "step-000000000006", "step-000000000007"]


class Ids(torch.utils.data.Dataset):
    def __len__(self):
        return 23

    def __getitem__(self, i):
        return i, torch.rand(()).item(), np.random.rand(), random.random()


@pytest.mark.parametrize("workers", [0, 2])
def test_loader_epochs_cover_everything_and_never_touch_the_global_rngs(workers):
    torch.manual_seed(5), random.seed(5), np.random.seed(5)
    state = (torch.get_rng_state(), random.getstate(), np.random.get_state()[1].copy())
    loader = ckpt.ResumableLoader(Ids(), batch_size=5, seed=3, num_workers=workers)
    epochs = []
    for _ in range(3):
        epochs.append([int(i) for ids, *_ in loader for i in ids])
    for e in epochs:
        assert sorted(e) == list(range(23))
    assert epochs[0] != epochs[1]  # a new order each epoch, without set_epoch
    assert torch.equal(torch.get_rng_state(), state[0]) and random.getstate() == state[1]
    assert (np.random.get_state()[1] == state[2]).all()
    assert loader.cursor() == (3, 0) or loader.cursor() == (2, 23)


@pytest.mark.parametrize("workers", [0, 2])
def test_loader_resumes_mid_epoch_with_the_same_augmentation(workers):
    ref = ckpt.ResumableLoader(Ids(), batch_size=5, seed=3, num_workers=workers)
    want = [b for _ in range(2) for b in ref]
    first = ckpt.ResumableLoader(Ids(), batch_size=5, seed=3, num_workers=workers)
    it = iter(first)
    seen = [next(it) for _ in range(3)]  # workers have prefetched more than that
    state = first.state_dict()
    assert (state["epoch"], state["position"]) == (0, 15)
    again = ckpt.ResumableLoader(Ids(), batch_size=5, seed=3, num_workers=workers)
    again.load_state_dict(state)
    rest = [b for b in again] + [b for b in again]
    got = seen + rest
    assert len(got) == len(want) + 0
    for a, b in zip(got, want):
        for x, y in zip(a, b):
            assert torch.equal(x, y)


def test_loader_refuses_another_dataset():
    a = ckpt.ResumableLoader(Ids(), batch_size=5, seed=3)
    b = ckpt.ResumableLoader(Ids(), batch_size=5, seed=4)
    with pytest.raises(ckpt.MismatchError, match="seed 3 vs 4"):
        b.load_state_dict(a.state_dict())


def test_batch_seed_is_the_cores():
    assert core.batch_seed(1, 2, 3) != core.batch_seed(1, 2, 4)
    assert not math.isnan(float(core.batch_seed(0, 0, 0)))
