"""The format's facts come from the C++ core (ckpt._core), never spelled again in Python: the step
directory's name, the root attributes, the format version, the environment record, the dtype
table and the adapter layouts seen in torch's layout (ckpt/format/rank_root.h, torch_layout.h).
Each test changes only what ckpt._core says and sees the Python side follow. And the Python
API's shape: errors chosen by the C++ status code, one exception type per kind of mistake, the
Stateful protocol, RestoreReport as a dataclass."""
import dataclasses
import json
import subprocess
import sys

import pytest
import torch
from torch import nn

import ckpt
import ckpt._core as core
from ckpt import _env, _restore_checks, _tree
from conftest import ROOT


def test_the_root_attributes_are_the_cores(tmp_path, monkeypatch):
    made = []

    def root_attrs(**kw):
        attrs = made_by_core(**kw)
        made.append(attrs)
        return dict(attrs, marker="from _core")

    made_by_core = core.root_attrs
    monkeypatch.setattr(core, "root_attrs", root_attrs)
    with ckpt.Checkpointer(tmp_path) as ck:
        ck.track(w=torch.ones(2))
        ck.save(4)
    opened = core.OpenRank(str(tmp_path / core.step_dir_name(4)), 0)
    attrs = opened.tree["attrs"]
    assert attrs["marker"] == "from _core"
    assert made and attrs["format"] == core.FORMAT and attrs["format_version"] == \
        core.FORMAT_VERSION
    assert attrs["components"] == ["rng", "w", "train"] and attrs["step"] == 4
    assert attrs["producer"] == "ckpt-python 0.1.0"


def test_the_format_version_read_is_the_cores(tmp_path, monkeypatch):
    with ckpt.Checkpointer(tmp_path) as ck:
        ck.track(w=torch.ones(2))
        ck.save(3)
    monkeypatch.setattr(core, "FORMAT_VERSION", 3)
    monkeypatch.setattr(core, "MAX_FORMAT_VERSION", 3)
    with ckpt.Checkpointer(tmp_path) as ck:  # versions 1 to 3 are read
        ck.track(w=torch.zeros(2))
        assert ck.restore_latest().restored and torch.equal(ck._objects["w"], torch.ones(2))
    monkeypatch.setattr(core, "MAX_FORMAT_VERSION", 0)
    with ckpt.Checkpointer(tmp_path) as ck:
        ck.track(w=torch.zeros(2))
        with pytest.raises(ckpt.CorruptCheckpointError,
                           match=r"rank-00000.h5: format 'ckpt' version 1, this build reads "
                                 r"format 'ckpt' version 0; refusing to start from scratch"):
            ck.restore_latest()


def test_the_step_directory_name_is_the_cores(tmp_path, monkeypatch):
    assert core.step_dir_name(12000) == "step-000000012000"
    assert core.rank_file_name(3) == "rank-00003.h5"
    with pytest.raises(ckpt.InvalidArgumentError, match="out of range"):
        core.step_dir_name(-1)
    monkeypatch.setattr(core, "step_dir_name", lambda step: f"named-by-core-{step}")
    with ckpt.Checkpointer(tmp_path) as ck:
        ck.track(w=torch.ones(2))
        ck.save(5, blocking=False)
        ck.wait()
    events = [json.loads(x) for x in core.read_journal(str(tmp_path))]
    assert [e["checkpoint"] for e in events if e["event"] == "save" and "checkpoint" in e] == \
        ["named-by-core-5"]
    assert "named-by-core-9" in _restore_checks._refusal("x", "y", 9)


def test_the_environment_record_is_the_cores_text():
    text = _env.environment()
    env = json.loads(text)
    assert env["libtorch"] == torch.__version__ and "python" in env and "compiler" not in env
    # the C++ Checkpointer's spelling: compact, keys sorted (nlohmann's object order)
    assert text == json.dumps(env, sort_keys=True, separators=(",", ":"))
    assert text == core.environment_json(
        libtorch=env["libtorch"], toolchain_key="python", toolchain=env["python"],
        cuda_available=env["cuda_available"], cuda_devices=env["cuda_devices"],
        cuda_runtime=env["cuda_runtime"], host=env["host"])


def test_the_dtype_table_is_the_cores(monkeypatch):
    names = set(_tree._DTYPES.values())
    plain = {n for n, (_, quantized) in core.DTYPES.items() if not quantized}
    assert names <= plain and {"bfloat16", "float16", "bool", "complex128"} <= names
    assert "qint8" in core.DTYPES and "qint8" not in names  # bytes alone do not make it
    for dtype, name in _tree._DTYPES.items():
        assert torch.empty(0, dtype=dtype).element_size() == core.DTYPES[name][0]
    monkeypatch.setattr(core, "DTYPES", {k: v for k, v in core.DTYPES.items()
                                         if k != "bfloat16"})
    assert torch.bfloat16 not in _tree._storable_dtypes()
    assert torch.float32 in _tree._storable_dtypes()


def test_a_dtype_the_core_stores_round_trips(tmp_path):
    dtype = getattr(torch, "complex32", None)
    if dtype not in _tree._DTYPES:
        pytest.skip("this torch has no complex32")
    src = torch.arange(6, dtype=torch.float16).reshape(3, 2)
    value = torch.view_as_complex(src.float()).to(dtype)
    with ckpt.Checkpointer(tmp_path) as ck:
        ck.track(c=ckpt.Value(value))
        ck.save(1)
    live = ckpt.Value(None)
    with ckpt.Checkpointer(tmp_path) as ck:
        ck.track(c=live)
        ck.restore_latest()
    assert live.value.dtype == dtype
    assert torch.equal(torch.view_as_real(live.value), torch.view_as_real(value))


def _adapter_optimizer_tree(model, step):
    """An AdamW's /optimizer group as the C++ adapter writes it (ckpt/torch/optimizer_state.h),
    made without libtorch: names, groups with parameter names, state by parameter name."""
    names = [n for n, _ in model.named_parameters()]
    keep, state = [], {}
    for i, (n, p) in enumerate(model.named_parameters()):
        moments = {k: torch.full_like(p, float(i + j + 1)) for j, k in
                   enumerate(("exp_avg", "exp_avg_sq"))}
        keep += moments.values()
        state[n] = {"attrs": {"step": step}, "children": {},
                    "tensors": {k: _tree.tensor_ref(t, keep) for k, t in moments.items()}}
    group = {"lr": 0.125, "betas": [0.5, 0.75], "eps": 1e-6, "weight_decay": 0.25,
             "amsgrad": False, "params": names}
    opt = {"attrs": {"type": "adamw", "param_names": names}, "tensors": {},
           "children": {"groups": {"attrs": {}, "tensors": {},
                                   "children": {"0": {"attrs": group, "tensors": {},
                                                      "children": {}}}},
                        "state": {"attrs": {}, "tensors": {}, "children": state}}}
    return opt, keep


def test_a_cpp_layout_optimizer_restores_through_the_cores_conversion(tmp_path):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 4), nn.Linear(4, 2))
    opt_node, keep = _adapter_optimizer_tree(model, 9)
    root = {"attrs": core.root_attrs(producer="ckpt 0.1.0", libtorch_version="x", step=9,
                                     rank=0, world_size=1, components=["optimizer"]),
            "tensors": {}, "children": {"optimizer": opt_node}}
    core.save_rank(str(tmp_path), 9, 0, 1, root)
    core.commit(str(tmp_path), 9, 1, ["optimizer"])
    opt = torch.optim.AdamW(model.parameters(), lr=1.0, foreach=False)
    with ckpt.Checkpointer(tmp_path, omit=["rng"]) as ck:
        rep = ck.track(optimizer=opt).restore_latest()
    assert rep.restored and rep.components == ["optimizer"]
    group = opt.param_groups[0]
    assert group["lr"] == 0.125 and group["betas"] == (0.5, 0.75) and group["eps"] == 1e-6
    assert group["foreach"] is False  # the live optimizer's own key, which C++ does not record
    state = opt.state_dict()["state"]
    for i, p in enumerate(model.parameters()):
        assert torch.equal(state[i]["exp_avg"], torch.full_like(p, float(i + 1)))
        assert torch.equal(state[i]["exp_avg_sq"], torch.full_like(p, float(i + 2)))
        assert isinstance(state[i]["step"], torch.Tensor) and int(state[i]["step"]) == 9
    model(torch.randn(2, 3)).sum().backward()
    opt.step()  # steps on from the restored moments
    assert int(opt.state_dict()["state"][0]["step"]) == 10


def test_a_lock_error_is_chosen_by_its_code_not_its_text(tmp_path):
    not_a_dir = tmp_path / "locked by nobody"
    not_a_dir.write_text("a file where a run directory should be")
    with pytest.raises(ckpt.CheckpointError) as e:
        core.RunLock(str(not_a_dir))
    assert "locked by nobody" in str(e.value) and not isinstance(e.value, ckpt.LockedError)
    run = tmp_path / "run"
    run.mkdir()
    holder = subprocess.Popen(  # another process holds RUN/LOCK (one process shares its own)
        [sys.executable, "-c", "import sys, ckpt._core as c; l = c.RunLock(sys.argv[1]); "
         "print('held', flush=True); sys.stdin.read()", str(run)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        with pytest.raises(ckpt.LockedError, match=f"/LOCK: locked by pid {holder.pid} host "):
            ckpt.Checkpointer(run)
    finally:
        holder.communicate("")


def test_a_callers_mistake_is_one_exception_type(tmp_path):
    with ckpt.Checkpointer(tmp_path) as ck:
        for bad in (lambda: ck.track(rng=ckpt.Value(1)), lambda: ck.save(-1)):
            with pytest.raises(ckpt.InvalidArgumentError):
                bad()
    with ckpt.Checkpointer(tmp_path, omit=["nothing"]) as ck:
        with pytest.raises(ckpt.InvalidArgumentError, match="omit: unknown component"):
            ck.save(1)
    with pytest.raises(ckpt.InvalidArgumentError, match="sampler= is ckpt's to set"):
        ckpt.ResumableLoader(list(range(4)), batch_size=2, sampler=None)
    with pytest.raises(ckpt.InvalidArgumentError, match="on_damaged"):
        ckpt.Checkpointer(tmp_path, on_damaged="ignore")
    assert issubclass(ckpt.InvalidArgumentError, ValueError)  # except ValueError still works


class _Counter:
    def __init__(self):
        self.n = 0

    def state_dict(self):
        return {"n": self.n}

    def load_state_dict(self, state):
        self.n = state["n"]


def test_what_track_takes_is_the_stateful_protocol(tmp_path):
    model = nn.Linear(2, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for obj in (model, opt, ckpt.Value(1), _Counter(),
                ckpt.ResumableLoader(list(range(4)), batch_size=2)):
        assert isinstance(obj, ckpt.Stateful), obj

    class SaveOnly:
        def state_dict(self):
            return {}

    assert not isinstance(SaveOnly(), ckpt.Stateful)
    with ckpt.Checkpointer(tmp_path) as ck:
        with pytest.raises(TypeError, match="has no state_dict\\(\\)/load_state_dict\\(\\)"):
            ck.track(x=SaveOnly())
        counter = _Counter()
        counter.n = 5
        ck.track(counter=counter).save(1)
    back = _Counter()
    with ckpt.Checkpointer(tmp_path) as ck:
        rep = ck.track(counter=back).restore_latest()
    assert back.n == 5
    assert dataclasses.is_dataclass(rep) and isinstance(rep, ckpt.RestoreReport)
    assert {f.name for f in dataclasses.fields(rep)} == {
        "restored", "step", "components", "missing", "skipped", "checkpoint", "note",
        "stepped_over"}
    assert rep.restored and rep.step == 1 and "counter" in rep.components
    assert ckpt.RestoreReport() == ckpt.RestoreReport() and ckpt.RestoreReport().missing == []


def test_release_number_is_the_packages():
    """ckpt._core.VERSION (the C++ kVersion) is the version pyproject.toml gives the package."""
    import re
    text = (ROOT / "python" / "pyproject.toml").read_text()
    m = re.search(r'^version = "([^"]+)"', text, re.M)
    assert m is not None and m.group(1) == core.VERSION
