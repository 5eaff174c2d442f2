"""A URL is never taken for a local folder: unsupported schemes are refused with one line, and
nothing named "gs:" or "s3:" appears in the working directory."""
import os
import subprocess

import pytest

import ckpt
from ckpt.errors import CheckpointError, InvalidArgumentError
from conftest import BUILD


REFUSED = ["gs://bucket/run", "az://c/run", "file:///tmp/run", "hdfs://nn/run", "s3:/bucket/run",
           "S3:/bucket", "s4://bucket/run"]


@pytest.mark.parametrize("url", REFUSED)
def test_checkpointer_refuses_other_urls(url, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(InvalidArgumentError) as e:
        ckpt.Checkpointer(url)
    msg = str(e.value)
    assert url in msg and "\n" not in msg
    assert os.listdir(tmp_path) == []  # no local folder named after the scheme


def test_s3_is_never_a_local_folder(tmp_path, monkeypatch):
    """s3:// goes to the store or fails with one line: it never writes a local "s3:" folder."""
    monkeypatch.chdir(tmp_path)
    for k in ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_ACCESS_KEY_ID",
              "AWS_SECRET_ACCESS_KEY", "AWS_PROFILE"):
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    with pytest.raises(CheckpointError) as e:
        ckpt.Checkpointer("s3://ckpt/run")
    assert "s3://ckpt/run" in str(e.value) and "\n" not in str(e.value)
    assert os.listdir(tmp_path) == []


def test_local_paths_unchanged(tmp_path):
    c = ckpt.Checkpointer(str(tmp_path / "run") + "/")
    assert c.run_dir == str(tmp_path / "run")
    assert (tmp_path / "run").is_dir()
    c.close()


@pytest.mark.parametrize("cmd", [["verify"], ["inspect"], ["audit"], ["lr"], ["coverage"]])
def test_cli_refuses_other_urls(cmd, tmp_path):
    p = subprocess.run([str(BUILD / "cli" / "ckpt"), *cmd, "gs://bucket/run"], cwd=tmp_path,
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 64, p.stderr
    assert p.stderr.count("\n") == 1 and "gs://bucket/run" in p.stderr
    assert os.listdir(tmp_path) == []
