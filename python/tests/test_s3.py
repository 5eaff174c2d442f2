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

ENV_FILE = pathlib.Path(os.environ.get("CKPT_S3_TEST_ENV", BUILD / "s3-server" / "env"))


def _server_env():
    if not ENV_FILE.exists():
        if os.environ.get("CKPT_S3_REQUIRED"):
            pytest.fail(f"{ENV_FILE}: the S3 test server is not running (scripts/s3-server.sh)")
        pytest.skip("no S3 test server (run under ctest, or scripts/s3-server.sh start)")
    env = {}
    for line in ENV_FILE.read_text().splitlines():
        line = line.removeprefix("export ")
        if "=" in line:
            k, v = line.split("=", 1)
            env[k] = v.strip("'\"")
    return env


@pytest.fixture
def s3(monkeypatch):
    env = _server_env()
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
    from ckpt.errors import LockedError
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
