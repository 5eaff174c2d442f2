"""The interpreter the integration tests train with: a venv with --system-site-packages (Debian's
torch 1.13 and numpy stay visible) and pinned transformers, accelerate and lightning from PyPI,
made once under the build tree and reused (fw_venv.py; CKPT_INTEGRATIONS_PYTHON names another
interpreter).

Without PyPI the tests skip with one line, unless CI is set: then they fail."""
import json
import os
import pathlib
import re
import signal
import socket
import subprocess
import sys
import urllib.request

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fw_venv  # noqa: E402 - the venv, made here or by scripts/test.sh

ROOT = pathlib.Path(__file__).resolve().parents[3]
BUILD = pathlib.Path(os.environ.get("CKPT_BUILD_DIR", ROOT / "build"))
HERE = pathlib.Path(__file__).resolve().parent


@pytest.fixture(scope="session")
def fw_python():
    named = os.environ.get("CKPT_INTEGRATIONS_PYTHON")
    if named:
        assert fw_venv.has_versions(named), \
            f"CKPT_INTEGRATIONS_PYTHON={named} lacks {fw_venv.WANT}"
        return named
    py = fw_venv.ensure(BUILD / "python" / "integrations-venv")
    if py is None:
        if os.environ.get("CI"):
            pytest.fail("CI is set but the package index is unreachable: the integration "
                        "tests need transformers, accelerate and lightning from PyPI")
        pytest.skip("integration tests skipped: PyPI unreachable (no transformers/lightning/"
                    "accelerate venv)")
    return str(py)


def run_script(python, script, *args, expect=0, env_extra=None, timeout=600):
    """One training process (a restart is a fresh process); returns its output."""
    env = dict(os.environ, PYTHONPATH=str(BUILD / "python"), OMP_NUM_THREADS="1",
               TOKENIZERS_PARALLELISM="false", HF_HUB_OFFLINE="1", PYTHONHASHSEED="0")
    env.update(env_extra or {})
    p = subprocess.run([python, str(HERE / script), *map(str, args)], env=env,
                       capture_output=True, text=True, timeout=timeout)
    assert p.returncode == expect, (f"{script} {args}: exit {p.returncode}, expected {expect}\n"
                                    f"{p.stdout[-4000:]}{p.stderr[-4000:]}")
    return p.stdout + p.stderr


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_ddp(python, script, *args, launcher, killed=False, may_fail=False, timeout=600):
    """One 2-process DDP run over gloo on 127.0.0.1 (a restart is a fresh one). launcher
    "torchrun": python -m torch.distributed.run --nproc_per_node 2 starts both ranks; "self":
    the script is started once and starts its second rank itself (Lightning's DDP launcher).
    killed: the ranks SIGKILL themselves (the script's --kill-at), so the run must end by a
    signal or, under torchrun, by torchrun's exit 1 for a failed worker; whatever of the run is
    left (the other rank, DataLoader workers) is then killed with its process group.
    Returns (exit status, output); may_fail: any exit status is returned, none asserted."""
    port = str(_free_port())
    env = dict(os.environ, PYTHONPATH=str(BUILD / "python"), OMP_NUM_THREADS="1",
               TOKENIZERS_PARALLELISM="false", HF_HUB_OFFLINE="1", PYTHONHASHSEED="0",
               MASTER_ADDR="127.0.0.1", MASTER_PORT=port, GLOO_SOCKET_IFNAME="lo")
    cmd = [python, str(HERE / script), *map(str, args)]
    if launcher == "torchrun":
        cmd[1:1] = ["-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_addr",
                    "127.0.0.1", "--master_port", port, "--monitor_interval", "0.2",
                    # torch 1.13's torchrun on Python 3.11 fails with its defaults (0, "no
                    # redirection"): its Std flag enum no longer iterates the zero member, so
                    # Std.from_str("0") is None. Redirecting stdout to its log and teeing it back
                    # to the console takes the non-zero path and changes nothing else here.
                    "--redirects", "1", "--tee", "1"]
    p = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         text=True, start_new_session=True)
    try:
        out, _ = p.communicate(timeout=timeout)
    finally:
        try:
            os.killpg(p.pid, signal.SIGKILL)  # the group this call started, nothing else
        except ProcessLookupError:
            pass
    ok = p.returncode in ((-9, 1) if launcher == "torchrun" else (-9,)) if killed else (
        p.returncode == 0)
    assert ok or may_fail, f"{script} {args}: exit {p.returncode} (killed={killed})\n{out[-6000:]}"
    return p.returncode, out


def last_error(output):
    """The last exception a failed run's processes raised (its cause, in short), not the
    launcher's report of the failed worker."""
    lines = [ln.strip() for ln in output.splitlines()
             if re.match(r"\s*\w+(Error|Exception): ", ln) and "ChildFailedError" not in ln]
    return lines[-1] if lines else output.strip().splitlines()[-1]


def losses_by_step(path):
    """global step -> the micro-batch losses of that step; a step run again after a restart
    replaces what the killed process had logged for it."""
    out, seen = {}, set()
    runs = []
    for line in pathlib.Path(path).read_text().splitlines():
        if line.startswith("#"):
            runs.append({})
            continue
        step, loss = line.split()
        if not runs:
            runs.append({})
        runs[-1].setdefault(int(step), []).append(loss)
    for run in runs:
        for step, values in run.items():
            out[step] = values
        seen |= set(run)
    return out


def compare(straight, resumed):
    """How a resumed run differs from the one that never stopped: params bit-exact, the first
    step whose losses differ, the largest parameter difference."""
    import numpy as np
    a = np.frombuffer((straight / "params.bin").read_bytes(), dtype=np.float32)
    b = np.frombuffer((resumed / "params.bin").read_bytes(), dtype=np.float32)
    # losses.txt: rank 0's (or the only process's); losses-rank<R>.txt: rank R's under DDP
    names = sorted(p.name for p in straight.glob("losses*.txt"))
    assert names == sorted(p.name for p in resumed.glob("losses*.txt")), (straight, resumed)
    differ, steps = set(), 0
    for name in names:
        la, lb = losses_by_step(straight / name), losses_by_step(resumed / name)
        differ |= {s for s in set(la) | set(lb) if la.get(s) != lb.get(s)}
        steps = len(la) if name == "losses.txt" else steps
    return {"params_bit_exact": a.tobytes() == b.tobytes(),
            "max_abs_param_diff": float(np.max(np.abs(a - b))) if a.shape == b.shape else None,
            "losses_equal": not differ, "first_step_losses_differ": min(differ, default=None),
            "steps_compared": steps, "ranks_compared": len(names)}


def audit_is_complete(run_dir):
    """`ckpt audit` (when the CLI is built) finds every component present and exits 0, with
    gradient accumulation too (a step consumes grad_accum_steps batches of the loader: the
    train component records it, verify/ours/ours_reader.cc check_cursor divides by it)."""
    cli = BUILD / "cli" / "ckpt"
    if not cli.exists():
        return
    p = subprocess.run([str(cli), "audit", "--json", str(run_dir)], capture_output=True,
                       text=True)
    report = json.loads(p.stdout)
    status = {name: c["status"] for name, c in report["components"].items()}
    bad = {n: s for n, s in status.items() if s not in ("present", "not_applicable")}
    assert not bad, (bad, p.stdout)
    assert p.returncode == 0 and report["complete"], p.stdout
