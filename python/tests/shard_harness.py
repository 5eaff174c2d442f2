"""What test_shard*.py share: the torch 2.x interpreter they run ranks with, and the launcher of
gloo ranks on 127.0.0.1 (each a fresh process, as a restart is).

The interpreter: $CKPT_TORCH2_PYTHON (a python with torch >= 2.4), else
<build>/python/torch2-venv/bin/python (scripts/torch2-venv.sh makes it), else the tests skip in
one line. It must be the CPython the extension is built for (3.11 here)."""
import functools
import json
import os
import pathlib
import socket
import subprocess

import pytest

from conftest import BUILD

HERE = pathlib.Path(__file__).resolve().parent


@functools.lru_cache(maxsize=None)
def _torch2():
    named = os.environ.get("CKPT_TORCH2_PYTHON")
    py = named or str(BUILD / "python" / "torch2-venv" / "bin" / "python")
    if not named and not os.path.exists(py):
        return None, ("sharded-state tests skipped: no torch 2.x python (set CKPT_TORCH2_PYTHON "
                      "or run scripts/torch2-venv.sh)")
    code = "import torch; print(torch.__version__)"
    p = subprocess.run([py, "-c", code], capture_output=True, text=True)
    if p.returncode != 0:
        return None, f"sharded-state tests skipped: {py} cannot import torch"
    version = tuple(int(x) for x in p.stdout.strip().split("+")[0].split(".")[:2])
    if version < (2, 4):
        return None, f"sharded-state tests skipped: {py} has torch {p.stdout.strip()} (< 2.4)"
    return py, None


def torch2_python():
    py, why = _torch2()
    if py is None:
        pytest.skip(why)
    return py


def _env(rank, world, port):
    return dict(os.environ, PYTHONPATH=str(BUILD / "python"), RANK=str(rank),
                WORLD_SIZE=str(world), LOCAL_RANK=str(rank), MASTER_ADDR="127.0.0.1",
                MASTER_PORT=str(port), OMP_NUM_THREADS="1", TORCH_CPP_LOG_LEVEL="ERROR",
                PYTHONWARNINGS="ignore")


def launch(world, script, *args, timeout=600):
    """Runs `script` (in python/tests) as `world` gloo ranks; asserts every rank exits 0 and
    returns their outputs."""
    py = torch2_python()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    procs = [subprocess.Popen([py, str(HERE / script), *map(str, args)], env=_env(r, world, port),
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
             for r in range(world)]
    outs = []
    try:
        for p in procs:
            outs.append(p.communicate(timeout=timeout)[0])
        # every failed rank's output: the first to fail is not always rank 0 (the others then
        # only report the lost connection)
        what = f"{script} {' '.join(map(str, args))}"
        failed = [f"rank {r} of {world} ({what}) exited {p.returncode}:\n{out[-6000:]}"
                  for r, (p, out) in enumerate(zip(procs, outs)) if p.returncode != 0]
        assert not failed, "\n".join(failed)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    return outs


def train(tmp_path, name, world, **cfg):
    """shard_train.py at `world` ranks with config `cfg`; returns rank 0's result."""
    out = tmp_path / f"{name}.json"
    cfg = dict({"save_every": 4, "stop_after": 0}, out=str(out), **cfg)
    conf = tmp_path / f"{name}.config.json"
    conf.write_text(json.dumps(cfg))
    launch(world, "shard_train.py", conf)
    return json.loads(out.read_text())
