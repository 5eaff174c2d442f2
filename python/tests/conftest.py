import os
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
BUILD = pathlib.Path(os.environ.get("CKPT_BUILD_DIR", ROOT / "build"))
TRAIN = ROOT / "examples" / "python" / "train.py"


def run_train(run_dir, *args):
    """examples/python/train.py in a fresh process (what a restart is)."""
    env = dict(os.environ, PYTHONPATH=str(BUILD / "python"))
    p = subprocess.run([sys.executable, str(TRAIN), "--run-dir", str(run_dir), *map(str, args)],
                       env=env, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    return p.stdout


def progress(run_dir):
    """step -> the last progress event logged for it (a resumed run repeats some steps)."""
    import ckpt._core as core
    import json
    out = {}
    for line in core.read_journal(str(run_dir)):
        ev = json.loads(line)
        if ev["event"] == "progress":
            out[ev["step"]] = ev
    return out


@pytest.fixture(scope="session")
def straight(tmp_path_factory):
    d = tmp_path_factory.mktemp("straight")
    run_train(d / "run", "--params-out", d / "params.bin")
    return {"run": d / "run", "params": (d / "params.bin").read_bytes(),
            "progress": progress(d / "run")}
