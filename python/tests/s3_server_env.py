"""The S3 test server's variables (AWS_ENDPOINT_URL, the keys, CKPT_S3_TEST_BUCKET) from the env
file scripts/s3-server.sh writes (CKPT_S3_TEST_ENV, default <build>/s3-server/env), for the tests
in python/tests and python/tests/integrations. No server: a skip, or a failure when
CKPT_S3_REQUIRED is set (ctest sets it)."""
import os
import pathlib

import pytest

_ROOT = pathlib.Path(__file__).resolve().parents[2]
_BUILD = pathlib.Path(os.environ.get("CKPT_BUILD_DIR", _ROOT / "build"))
ENV_FILE = pathlib.Path(os.environ.get("CKPT_S3_TEST_ENV", _BUILD / "s3-server" / "env"))


def server_env():
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
