"""Checkpoints on S3-compatible object storage (docs/object-storage.md) against a real server on
loopback: SeaweedFS, started by the ctest fixture (scripts/s3-server.sh). A training script whose
run directory is s3://bucket/prefix stops and resumes in fresh processes and ends bit-identical
to a run that never stopped (on a local disk), and the CLI reads the run on the store."""
import json
import os
import pathlib
import subprocess
import sys
import uuid

import pytest

from conftest import BUILD, progress, run_train
from s3_server_env import server_env

@pytest.fixture
def s3(monkeypatch):
    env = server_env()
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    return f"s3://{env['CKPT_S3_TEST_BUCKET']}/py-{uuid.uuid4().hex}"


def _cli(*args):
    return subprocess.run([str(BUILD / "cli" / "ckpt"), *map(str, args)], capture_output=True,
                          text=True, timeout=300)


def test_resume_on_s3_is_bit_exact(straight, s3, tmp_path):
    run = s3 + "/run"
    out = run_train(run, "--stop-after", 57)
    assert "stopping after step 57" in out
    assert not (pathlib.Path.cwd() / "s3:").exists()  # never a local folder named "s3:"
    out = run_train(run, "--stop-after", 78, "--save-on-stop")
    assert "start at step 50" in out
    out = run_train(run, "--params-out", tmp_path / "params.bin")
    assert "start at step 78" in out
    assert (tmp_path / "params.bin").read_bytes() == straight["params"]
    got, want = progress(run), straight["progress"]
    for step in want:
        for key in ("loss", "lr", "batch", "epoch", "position", "adam_step"):
            assert got[step][key] == want[step][key], (step, key)
    assert not (pathlib.Path.cwd() / "s3:").exists()

    # The CLI reads the run where it is.
    v = _cli("verify", run, "--json")
    assert v.returncode == 0, v.stdout + v.stderr
    a = _cli("audit", run, "--json")
    assert a.returncode == 0, a.stdout + a.stderr
    assert json.loads(a.stdout)
    lr = _cli("lr", run)
    assert lr.returncode in (0, 2), lr.stderr
    cov = _cli("coverage", run)
    assert cov.returncode in (0, 2), cov.stderr


def test_omitted_optimizer_on_s3_breaks_as_predicted(straight, s3):
    """The negative control: without the optimizer the resumed run diverges (so the bit-exact
    test above can fail)."""
    run = s3 + "/run"
    run_train(run, "--stop-after", 50, "--omit", "optimizer")
    out = run_train(run, "--stop-after", 56, "--omit", "optimizer")
    assert "start at step 50" in out
    got = progress(run)
    assert got[51]["adam_step"] != straight["progress"][51]["adam_step"]


def test_second_writer_is_refused(s3):
    import ckpt
    first = ckpt.Checkpointer(s3 + "/run")
    try:
        env = dict(os.environ, PYTHONPATH=str(BUILD / "python"))
        p = subprocess.run([sys.executable, "-c", f"import ckpt; ckpt.Checkpointer({s3 + '/run'!r})"],
                           env=env, capture_output=True, text=True, timeout=120)
        assert p.returncode != 0
        assert "LockedError" in p.stderr and "locked by pid" in p.stderr
    finally:
        first.close()
    ckpt.Checkpointer(s3 + "/run").close()  # released: taken at once


def test_restore_asks_the_store_only_what_it_needs(s3):
    """A restore of a run that keeps many checkpoints: one LIST, the newest commit record (not
    every one kept), one HEAD of the rank file (shared by the size check, the structure and the
    data reads), one PUT of the journal (its start and restore events together)."""
    import torch
    import ckpt
    import ckpt._core as core
    model = torch.nn.Linear(64, 64)
    run = s3 + "/many"
    with ckpt.Checkpointer(run, keep_last=0) as ck:
        ck.track(model=model)
        for step in range(1, 7):
            ck.save(step)
    want = {k: v.clone() for k, v in model.state_dict().items()}
    with torch.no_grad():
        model.weight.zero_()
    with ckpt.Checkpointer(run) as ck:
        ck.track(model=model)
        before = core.store_traffic()
        rep = ck.restore_latest()
        after = core.store_traffic()
    assert rep.step == 6
    assert all(torch.equal(v, want[k]) for k, v in model.state_dict().items())
    t = {k: after[k] - before[k] for k in after}
    print("restore of 1 of 6 checkpoints:", t)
    assert t["lists"] == 1 and t["heads"] == 1 and t["puts"] == 1, t
    # LATEST, COMMIT.json, the manifest, the journal, the rank file's structure and tensors;
    # reading every commit record kept was 6 more, each of them twice (12)
    assert t["gets"] <= 8, t


DEMO = BUILD / "examples" / "ckpt-train-demo"


def _demo(run, *args, code=0):
    p = subprocess.run([str(DEMO), "--run-dir", str(run), *map(str, args)], capture_output=True,
                       text=True, timeout=300)
    assert p.returncode == code, p.stdout + p.stderr
    return p.stdout


def _digest(out):
    return out.strip().splitlines()[-1].split()[-1]


@pytest.mark.skipif(not DEMO.exists(), reason="ckpt-train-demo needs libtorch")
def test_cxx_checkpointer_resume_on_s3_is_bit_exact(s3, tmp_path):
    """The C++ Checkpointer (examples/train_demo.cc) on s3://: preempted, crashed between saves
    and resumed in fresh processes, it ends with the same parameters as a run on a local disk that
    never stopped; without the optimizer it does not (so the comparison can fail)."""
    want = _digest(_demo(tmp_path / "straight"))
    run = s3 + "/cxx"
    _demo(run, "--stop-at", 30)
    out = _demo(run, "--crash-at", 41, code=3)  # the lease of a crashed job is taken at once
    assert "restored step-000000000030" in out
    out = _demo(run)
    assert "restored step-000000000030" in out
    assert _digest(out) == want
    assert not (pathlib.Path.cwd() / "s3:").exists()
    got, local = progress(run), progress(tmp_path / "straight")
    assert sorted(got) == sorted(local) and len(got) == 200
    for step, rec in local.items():
        assert (got[step]["lr"], got[step]["loss"]) == (rec["lr"], rec["loss"]), step
    # The recorder's file went to the store when it closed.
    assert not list(tmp_path.glob("s3:*"))
    broken = s3 + "/cxx-omit"
    _demo(broken, "--stop-at", 30, "--omit", "optimizer")
    assert _digest(_demo(broken, "--omit", "optimizer")) != want


def test_cli_load_bench_and_export_on_s3(straight, s3, tmp_path):
    run = s3 + "/run"
    run_train(run, "--stop-after", 20)
    lb = _cli("load-bench", run)
    assert lb.returncode == 0, lb.stderr
    assert "hashes verified" in lb.stdout + lb.stderr
    # To a local folder and to the store (no rename there: final names, whole objects).
    for out in (tmp_path / "exported", s3 + "/exported"):
        e = _cli("export", run, out, "--to", "safetensors", "--with-optimizer")
        assert e.returncode == 0, e.stdout + e.stderr
        i = _cli("inspect", f"{out}/model.safetensors")
        assert i.returncode == 0, i.stdout + i.stderr
        assert "safetensors" in i.stdout
    assert not (pathlib.Path.cwd() / "s3:").exists()
    # A missing checkpoint writes nothing to the store.
    e = _cli("export", s3 + "/nothing-here", s3 + "/exported-none", "--to", "safetensors")
    assert e.returncode != 0 and "\n" not in e.stderr.strip()
    assert _cli("inspect", s3 + "/exported-none/model.safetensors").returncode != 0
