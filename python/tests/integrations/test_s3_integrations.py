"""Lightning (CkptIO) and Accelerate (save_state/load_state) with s3:// run directories on the
s3_server fixture's SeaweedFS (docs/object-storage.md): saved in one process, restored in a fresh
one with the same parameters and step, and, for Lightning, removed with remove_checkpoint. A URL is
never taken for a local path: nothing named "s3:" appears in the working directory."""
import json
import pathlib
import sys
import uuid

import pytest

from conftest import HERE, run_script

sys.path.insert(0, str(HERE.parent))  # python/tests: the S3 server's variables
from s3_server_env import server_env  # noqa: E402

SCRIPT = "s3_train.py"


@pytest.fixture
def store_env():
    return server_env()


def _run(fw_python, env, tmp_path, *args):
    out = run_script(fw_python, SCRIPT, *args, env_extra=env)
    assert not (pathlib.Path.cwd() / "s3:").exists() and not (tmp_path / "s3:").exists()
    lines = [line for line in out.splitlines() if line.startswith("RESULT ")]
    assert len(lines) == 1, out[-4000:]
    return json.loads(lines[0].removeprefix("RESULT "))


@pytest.mark.parametrize("framework", ["lightning", "accelerate"])
def test_s3_run_directory_saves_and_restores(fw_python, store_env, tmp_path, framework):
    url = f"s3://{store_env['CKPT_S3_TEST_BUCKET']}/{framework}-{uuid.uuid4().hex}/run"
    saved = _run(fw_python, store_env, tmp_path, framework, "save", url)
    assert saved["step"] == 4
    restored = _run(fw_python, store_env, tmp_path, framework, "load", url)
    assert restored == saved
    if framework == "lightning":
        assert _run(fw_python, store_env, tmp_path, framework, "remove", url) == {"exists": False}
