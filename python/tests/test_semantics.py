"""What a state means across a save and a restore: keys and their order (escaped where they would
collide with the format's own names), live Python values, refused restores that touch nothing,
damaged or newer checkpoints never stepped over silently, and Ctrl-C or an exit in the middle of
a save (issues 27 and 29)."""
import gc
import json
import os
import pathlib
import signal
import subprocess
import sys
import textwrap

import pytest
import torch
from torch import nn

import ckpt
import ckpt._core as core
from ckpt import _tree

ODD_KEYS = ["ckpt.every", "ckpt.kind", "ckpt.order", "a/b", "/", ".", "..", "", "%", "50%",
            "%2F", "nul\0byte", "ckpt", "c"]


class Holder:
    def __init__(self, state):
        self.state = state

    def state_dict(self):
        return self.state

    def load_state_dict(self, sd):
        self.state = sd


def _round_trip(tmp_path, state, fresh):
    with ckpt.Checkpointer(tmp_path) as ck:
        ck.track(thing=Holder(state))
        ck.save(1)
    got = Holder(fresh)
    with ckpt.Checkpointer(tmp_path) as ck:
        ck.track(thing=got)
        rep = ck.restore_latest()
    return got.state, rep


# --- keys: escaped, in insertion order ---------------------------------------------------------
def test_keys_that_look_like_the_formats_own_round_trip(tmp_path):
    state, rep = _round_trip(tmp_path, {"ckpt.every": 500, "epoch": 3}, {})
    assert state == {"ckpt.every": 500, "epoch": 3} and rep.skipped == []
    state, _ = _round_trip(tmp_path / "kind", {"ckpt.kind": "mine", "x": [1, 2]}, {})
    assert state == {"ckpt.kind": "mine", "x": [1, 2]}


def test_every_odd_key_round_trips_as_every_kind_of_entry(tmp_path):
    src = {}
    for i, k in enumerate(ODD_KEYS):
        src[k] = {"attr": i, "tensor": torch.full((2,), float(i)), "none": None,
                  "bytes": k.encode(), "list": [i, i + 1], "child": {k: i}}
    got, rep = _round_trip(tmp_path, src, {})
    assert rep.skipped == []
    assert list(got) == ODD_KEYS
    for i, k in enumerate(ODD_KEYS):
        g = got[k]
        assert g["attr"] == i and g["none"] is None and g["bytes"] == k.encode()
        assert torch.equal(g["tensor"], torch.full((2,), float(i))) and g["list"] == [i, i + 1]
        assert g["child"] == {k: i}


def test_a_module_named_with_a_slash_round_trips(tmp_path):
    torch.manual_seed(0)

    def make():
        m = nn.Module()
        m.add_module("enc/0", nn.Linear(3, 2))  # torch allows "/", only "." is refused
        m.add_module("head", nn.Linear(2, 1))
        return m

    src = make()
    with ckpt.Checkpointer(tmp_path) as ck:
        ck.track(model=src)
        ck.save(1)
    dst = make()
    with ckpt.Checkpointer(tmp_path) as ck:
        ck.track(model=dst)
        ck.restore_latest()
    for (k, v), (k2, v2) in zip(src.state_dict().items(), dst.state_dict().items()):
        assert k == k2 and torch.equal(v, v2)
    assert "enc/0.weight" in dst.state_dict()


def test_dict_order_is_kept(tmp_path):
    src = {"zeta": 1, "alpha": torch.ones(1), "mid": None, "10": [1, 2], "9": {"b": 1, "a": 2}}
    got, _ = _round_trip(tmp_path, src, {})
    assert list(got) == ["zeta", "alpha", "mid", "10", "9"]
    assert list(got["9"]) == ["b", "a"]
    got, _ = _round_trip(tmp_path / "int", {7: "x", -1: "y", 3: "z"}, {})
    assert list(got) == [7, -1, 3]


def test_optimizer_per_parameter_keys_keep_torchs_order(tmp_path):
    torch.manual_seed(0)
    model = nn.Linear(4, 2)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2, amsgrad=True)
    model(torch.randn(3, 4)).sum().backward()
    opt.step()
    with ckpt.Checkpointer(tmp_path) as ck:
        ck.track(model=model, optimizer=opt)
        ck.save(1)
    dst_model = nn.Linear(4, 2)
    dst = torch.optim.AdamW(dst_model.parameters(), lr=1e-2, amsgrad=True)
    with ckpt.Checkpointer(tmp_path) as ck:
        ck.track(model=dst_model, optimizer=dst)
        ck.restore_latest()
    want, got = opt.state_dict(), dst.state_dict()
    assert [list(s) for s in got["state"].values()] == [list(s) for s in want["state"].values()]
    assert list(got["param_groups"][0]) == list(want["param_groups"][0])


def test_a_group_without_an_order_attribute_reads_as_before():
    # What files written before ckpt.order existed hold: names as the keys, "%" not an escape.
    meta = {"attrs": {"ckpt.kind": "dict", "b%2F": 1, "a": 2}, "tensors": {}, "children": {}}
    assert _tree.decode(meta, {"tensors": {}, "children": {}}, None, "/x", []) == \
        {"b%2F": 1, "a": 2}
    meta["attrs"]["ckpt.order"] = ["b%2F", "a"]
    assert _tree.decode(meta, {"tensors": {}, "children": {}}, None, "/x", []) == \
        {"b/": 1, "a": 2}


def test_a_state_with_mixed_key_types_is_refused_naming_the_component(tmp_path):
    with ckpt.Checkpointer(tmp_path) as ck:
        ck.track(thing=Holder({1: "a", "b": 2}))
        with pytest.raises(ckpt.InvalidArgumentError, match=r"/thing: .*not all str or all int"):
            ck.save(1)


# --- live Python values --------------------------------------------------------------------------
def test_an_immutable_value_is_refused_with_the_holder_to_use(tmp_path):
    with ckpt.Checkpointer(tmp_path) as ck:
        with pytest.raises(TypeError,
                           match=r"step=0: a Python int cannot change.*ck\.track\(step=step\)"):
            ck.track(step=0)
        with pytest.raises(TypeError, match=r"ckpt\.Value\('x'\)"):
            ck.track(name="x")


def test_a_value_holder_saves_its_value_at_the_save(tmp_path):
    step = ckpt.Value(0)
    with ckpt.Checkpointer(tmp_path) as ck:
        ck.track(step=step)
        step.value = 800
        ck.save(800)
    again = ckpt.Value(0)
    with ckpt.Checkpointer(tmp_path) as ck:
        ck.track(step=again)
        ck.restore_latest()
    assert again.value == 800


def test_a_scalar_component_of_an_older_file_restores_into_a_value(tmp_path):
    with ckpt.Checkpointer(tmp_path) as ck:
        ck.track(scale=ckpt.Value(0.5))
        keep = []  # the captured tensors' memory, until save_rank has written it
        root, names = ck._capture(3, keep, [])
        attrs = root["children"]["scale"]["attrs"]
        del attrs["ckpt.order"]  # the group track(scale=0.5) wrote before Value existed
        attrs["ckpt.plain"] = True
        core.save_rank(str(tmp_path), 3, 0, 1, root)
        core.commit(str(tmp_path), 3, 1, names)
    scale = ckpt.Value(1.0)
    with ckpt.Checkpointer(tmp_path) as ck:
        ck.track(scale=scale)
        assert ck.restore_latest().components == ["scale", "rng"]
    assert scale.value == 0.5


# --- a refused restore writes nothing ------------------------------------------------------------
def _net(extra):
    layers = [nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 2)] + ([nn.Linear(2, 2)] if extra else [])
    return nn.Sequential(*layers)


@pytest.mark.parametrize("saved_extra,live_extra,key", [(False, True, '"3.weight"'),
                                                         (True, False, '"3.weight"')])
def test_a_module_with_other_keys_is_refused_before_anything_changes(tmp_path, saved_extra,
                                                                     live_extra, key):
    torch.manual_seed(1)
    src = _net(saved_extra)
    with ckpt.Checkpointer(tmp_path) as ck:
        ck.track(model=src, opt=torch.optim.SGD(src.parameters(), 0.1))
        ck.save(4)
    torch.manual_seed(2)
    live = _net(live_extra)
    before = {k: v.clone() for k, v in live.state_dict().items()}
    rng = torch.get_rng_state()
    with ckpt.Checkpointer(tmp_path) as ck:
        ck.track(model=live)
        with pytest.raises(ckpt.MismatchError, match=r'component "model": .*' + key):
            ck.restore_latest()
    assert torch.equal(torch.get_rng_state(), rng)
    for k, v in live.state_dict().items():
        assert torch.equal(v, before[k]), k


class _Wrap(nn.Module):
    """A wrapper's key naming: DDP and DataParallel hold the model as `module`, torch.compile's
    OptimizedModule as `_orig_mod` (neither needs a process group or a compiler here)."""

    def __init__(self, inner, attr):
        super().__init__()
        setattr(self, attr, inner)


@pytest.mark.parametrize("saved,live", [("_orig_mod", None), (None, "module"),
                                        ("module", "_orig_mod"), ("_orig_mod.module", None)])
def test_a_module_saved_through_a_wrapper_restores_without_it(tmp_path, saved, live):
    """torch.compile or DDP at save time and not at restore (evaluation, a debugging run), or
    the other way round: the keys differ only by the wrappers' prefixes, restored by name."""
    def wrap(m, attrs):
        for attr in reversed(attrs.split(".")) if attrs else ():
            m = _Wrap(m, attr)
        return m
    torch.manual_seed(1)
    src = _net(False)
    with ckpt.Checkpointer(tmp_path) as ck:
        ck.track(model=wrap(src, saved))
        ck.save(4)
    torch.manual_seed(2)
    dst = _net(False)
    with ckpt.Checkpointer(tmp_path) as ck:
        ck.track(model=wrap(dst, live))
        rep = ck.restore_latest()
    assert rep.restored and "a DDP or torch.compile wrapper added or removed" in rep.note
    said = f'saved with keys under "{saved}."' if saved else "saved with unprefixed keys"
    assert said in rep.note
    for k, v in src.state_dict().items():
        assert torch.equal(dst.state_dict()[k], v), k


def test_a_wrapper_prefix_does_not_hide_other_missing_keys(tmp_path):
    torch.manual_seed(1)
    with ckpt.Checkpointer(tmp_path) as ck:
        ck.track(model=_Wrap(_net(True), "_orig_mod"))
        ck.save(4)
    with ckpt.Checkpointer(tmp_path) as ck:
        ck.track(model=_net(False))
        with pytest.raises(ckpt.MismatchError, match=r'the checkpoint lacks "0.weight"'):
            ck.restore_latest()


def test_a_loader_over_another_dataset_is_refused_before_anything_changes(tmp_path):
    torch.manual_seed(1)
    src = _net(False)
    with ckpt.Checkpointer(tmp_path) as ck:
        ck.track(model=src, loader=ckpt.ResumableLoader(list(range(100)), batch_size=10))
        ck.save(4)
    torch.manual_seed(2)
    live = _net(False)
    before = {k: v.clone() for k, v in live.state_dict().items()}
    rng = torch.get_rng_state()
    with ckpt.Checkpointer(tmp_path) as ck:
        ck.track(model=live, loader=ckpt.ResumableLoader(list(range(90)), batch_size=10))
        with pytest.raises(ckpt.MismatchError, match=r"loader: .*dataset_size 100 vs 90"):
            ck.restore_latest()
    assert torch.equal(torch.get_rng_state(), rng)
    for k, v in live.state_dict().items():
        assert torch.equal(v, before[k]), k


# --- damaged and newer checkpoints ---------------------------------------------------------------
def _commit_record(step_dir, **changes):
    path = pathlib.Path(step_dir) / "COMMIT.json"
    rec = json.loads(path.read_text())
    rec["body"].update(changes)
    body = json.dumps(rec["body"], sort_keys=True, separators=(",", ":"))
    rec["xxh3"] = core.xxh3_hex(body.encode())
    path.write_text(json.dumps(rec))


def _save(run, step, value):
    with ckpt.Checkpointer(run, keep_last=0) as ck:
        ck.track(w=torch.full((3,), float(value)))
        ck.save(step)
    return run / f"step-{step:012d}"


def test_a_newer_commit_record_is_refused_and_fallback_says_what_it_stepped_over(tmp_path):
    only = _save(tmp_path / "only", 10, 1)
    _commit_record(only, version=2)
    with ckpt.Checkpointer(tmp_path / "only") as ck:
        ck.track(w=torch.zeros(3))
        with pytest.raises(ckpt.CorruptCheckpointError,
                           match=r"step-000000000010: damaged checkpoint .*COMMIT.json.*version.*"
                                 r"refusing to start from scratch"):
            ck.restore_latest()
    with ckpt.Checkpointer(tmp_path / "only", on_damaged="fallback") as ck:
        ck.track(w=torch.zeros(3))
        rep = ck.restore_latest()
    assert not rep.restored and rep.stepped_over[0].startswith("step-000000000010: ")

    run = tmp_path / "two"
    _save(run, 10, 1)
    _commit_record(_save(run, 20, 2), version=2)
    live = torch.zeros(3)
    with ckpt.Checkpointer(run) as ck:
        ck.track(w=live)
        with pytest.raises(ckpt.CorruptCheckpointError,
                           match=r"refusing to restore the older step-000000000010"):
            ck.restore_latest()
    assert torch.equal(live, torch.zeros(3))
    with ckpt.Checkpointer(run, on_damaged="fallback") as ck:
        ck.track(w=live)
        rep = ck.restore_latest()
    assert rep.step == 10 and torch.equal(live, torch.ones(3))
    assert len(rep.stepped_over) == 1 and "step-000000000020" in rep.note
    events = [json.loads(x) for x in core.read_journal(str(run))]
    assert events[-1]["event"] == "restore" and events[-1]["stepped_over"] == rep.stepped_over


def test_a_rank_file_of_a_newer_format_version_is_refused_naming_it(tmp_path):
    _save(tmp_path, 10, 1)
    with ckpt.Checkpointer(tmp_path, keep_last=0) as ck:  # a consistent newer writer's file
        ck.track(w=torch.full((3,), 2.0))
        keep, skipped = [], []
        root, names = ck._capture(20, keep, skipped)
        root["attrs"]["format_version"] = core.MAX_FORMAT_VERSION + 1
        core.save_rank(str(tmp_path), 20, 0, 1, root)
        core.commit(str(tmp_path), 20, 1, names)
    live = torch.zeros(3)
    with ckpt.Checkpointer(tmp_path) as ck:
        ck.track(w=live)
        with pytest.raises(ckpt.CorruptCheckpointError,
                           match=rf"step-000000000020/rank-00000.h5: format 'ckpt' version "
                                 rf"{core.MAX_FORMAT_VERSION + 1}, this build reads format "
                                 rf"'ckpt' versions 1 to {core.MAX_FORMAT_VERSION}; refusing to "
                                 r"restore the older step-000000000010"):
            ck.restore_latest()
    assert torch.equal(live, torch.zeros(3))
    with ckpt.Checkpointer(tmp_path, on_damaged="fallback") as ck:
        ck.track(w=live)
        rep = ck.restore_latest()
    assert rep.step == 10 and torch.equal(live, torch.ones(3))
    assert f"rank-00000.h5: format 'ckpt' version {core.MAX_FORMAT_VERSION + 1}" in \
        rep.stepped_over[0]


def test_on_damaged_takes_only_its_two_values(tmp_path):
    with pytest.raises(ckpt.InvalidArgumentError, match="on_damaged"):
        ckpt.Checkpointer(tmp_path, on_damaged="ignore")


# --- Ctrl-C in the middle of a save --------------------------------------------------------------
def _sigint():
    os.kill(os.getpid(), signal.SIGINT)


def test_ctrl_c_after_the_rank_file_is_durable_still_commits(tmp_path, monkeypatch):
    real = core.save_rank

    def save_then_interrupt(*args):
        out = real(*args)
        _sigint()  # lands as the C++ call returns: between the rank file and the commit
        return out

    monkeypatch.setattr(core, "save_rank", save_then_interrupt)
    with ckpt.Checkpointer(tmp_path) as ck:
        ck.track(w=torch.ones(4))
        with pytest.raises(KeyboardInterrupt):
            ck.save(7)
    assert core.find_latest(str(tmp_path))["step"] == 7
    saves = [json.loads(x) for x in core.read_journal(str(tmp_path))]
    assert any(e["event"] == "save" and e["step"] == 7 for e in saves)


class _InterruptAfterSubmit:
    def __init__(self):
        self._real = core.BackgroundSaver()

    def submit(self, *args):
        info = self._real.submit(*args)
        _sigint()  # the job is in flight; the interrupt lands before submit() returns
        return info

    def __getattr__(self, name):
        return getattr(self._real, name)


def test_ctrl_c_during_a_non_blocking_snapshot_leaves_the_save_in_flight(tmp_path):
    (tmp_path / "step-000000000005").write_text("in the way")  # the background write fails
    ck = ckpt.Checkpointer(tmp_path)
    ck.track(w=torch.ones(4))
    ck._bg = _InterruptAfterSubmit()
    with pytest.raises(KeyboardInterrupt):
        ck.save(5, blocking=False)
    with pytest.raises(ckpt.CheckpointError, match="background save of step 5"):
        ck.close()  # waits for the save and raises its failure: never lost


# --- exit without close() ------------------------------------------------------------------------
def _run_script(tmp_path, body):
    script = tmp_path / "script.py"
    script.write_text(textwrap.dedent(body))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    return subprocess.run([sys.executable, str(script), str(tmp_path / "run")], env=env,
                          capture_output=True, text=True, timeout=120)


def test_a_failed_last_non_blocking_save_is_reported_at_exit(tmp_path):
    p = _run_script(tmp_path, """
        import os, sys, torch, ckpt
        run = sys.argv[1]
        ck = ckpt.Checkpointer(run)
        ck.track(w=torch.ones(4))
        open(os.path.join(run, "step-000000000003"), "w").write("in the way")
        ck.save(3, blocking=False)
        print("trained")
    """)
    assert p.returncode == 120, p.stderr
    assert p.stdout == "trained\n"
    lines = p.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("ckpt: background save of step 3: "), p.stderr


def test_a_good_last_non_blocking_save_is_committed_at_exit(tmp_path):
    p = _run_script(tmp_path, """
        import sys, torch, ckpt
        ck = ckpt.Checkpointer(sys.argv[1])
        ck.track(w=torch.ones(1 << 20))
        ck.save(3, blocking=False)
    """)
    assert p.returncode == 0 and p.stderr == "", p.stderr
    assert core.find_latest(str(tmp_path / "run"))["step"] == 3


def test_a_failed_save_of_a_checkpointer_freed_without_close_is_printed(tmp_path, capfd):
    (tmp_path / "step-000000000004").write_text("in the way")
    ck = ckpt.Checkpointer(tmp_path)
    ck.track(w=torch.ones(2))
    ck.save(4, blocking=False)
    del ck  # the last reference: freed here, its failure printed once
    gc.collect()
    err = capfd.readouterr().err
    assert err.startswith("ckpt: background save of step 4: ") and err.count("\n") == 1, err


# --- close() -----------------------------------------------------------------------------------
def _open_files():
    fds = pathlib.Path("/proc/self/fd")
    out = []
    for fd in fds.iterdir():
        try:
            out.append(os.readlink(fd))
        except OSError:
            pass
    return out


def test_close_closes_the_journal(tmp_path):
    ck = ckpt.Checkpointer(tmp_path)
    ck.track(w=torch.ones(2))
    ck.restore_latest()
    ck.save(1)
    ck.save(2, blocking=False)
    journal = str(tmp_path / "journal.jsonl")
    assert journal in _open_files()
    ck.close()
    assert journal not in _open_files()
    assert core.find_latest(str(tmp_path))["step"] == 2
