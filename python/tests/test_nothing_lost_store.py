"""Issue 27, the run directory's rules from Python: a re-save of a committed step survives a kill
at each rename and write (real SIGKILLs, strace); odd steps are refused before anything is
written; two Checkpointers of one process take turns; a deleted run directory, a closed
Checkpointer and a read-only one write nothing; RUN/LOCK dies with the process that took it
although a forked child lives on."""
import json
import os
import shutil
import signal
import subprocess
import sys
import time

import pytest
import torch
from torch import nn

import ckpt
import ckpt._core as core
from conftest import BUILD, TRAIN, run_train

ENV = dict(os.environ, PYTHONPATH=str(BUILD / "python"))
STEP = "step-{:012d}"


def _model(width=64):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(32, width), nn.ReLU(), nn.Linear(width, 8))
    return model, torch.optim.AdamW(model.parameters(), lr=1e-2)


def _intact(run):
    """Every step directory committed and verified clean; LATEST's step. (A kill after a
    re-save committed may leave the replaced copy as step-N.resave, which readers never see and
    the next re-save or retention removes.)"""
    names = sorted(n for n in os.listdir(run) if n.startswith("step-"))
    for n in names:
        if n.endswith(".resave"):
            continue
        assert len(n) == 17, n
        assert core.verify(os.path.join(str(run), n)) == [], n
    return core.find_latest(str(run))["step"]


def _holder(run):
    """Another process holding RUN/LOCK (the live training job)."""
    p = subprocess.Popen([sys.executable, "-c",
                          "import sys, time, ckpt._core as c\n"
                          "l = c.RunLock(sys.argv[1]); print('held', flush=True); time.sleep(120)",
                          str(run)], env=ENV, stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "held"
    return p


@pytest.mark.parametrize("blocking", [True, False])
def test_odd_steps_are_refused_before_anything_is_written(tmp_path, blocking):
    model, opt = _model()
    with ckpt.Checkpointer(tmp_path) as ck:
        ck.track(model=model, optimizer=opt)
        ck.save(5)
        for bad in (10**12, -1, 10**30):
            with pytest.raises(ValueError, match=rf"save: step {bad} is out of range: a "
                                                 r"checkpoint's step is in \[0, 999999999999\]"):
                ck.save(bad, blocking=blocking)
        for bad in (9.7, True, "3", None):
            with pytest.raises(TypeError, match="save: step must be an int"):
                ck.save(bad, blocking=blocking)
        ck.wait()
        ck.save(core.MAX_STEP, blocking=blocking)  # the largest step is a step like any other
    assert core.MAX_STEP == 10**12 - 1
    assert sorted(n for n in os.listdir(tmp_path) if n.startswith("step-")) == [
        STEP.format(5), STEP.format(core.MAX_STEP)]
    assert _intact(tmp_path) == core.MAX_STEP
    saves = [json.loads(x)["step"] for x in core.read_journal(str(tmp_path))
             if json.loads(x)["event"] == "save" and "checkpoint" in json.loads(x)]
    assert saves == [5, core.MAX_STEP]


def _syscall_counts(run, args):
    out = run.parent / "counts"
    subprocess.run(["strace", "-f", "-c", "-o", str(out), "-e",
                    "trace=rename,renameat2,pwrite64,fsync,fdatasync,unlink,rmdir",
                    sys.executable, str(TRAIN), "--run-dir", str(run), *args],
                   env=ENV, check=True, capture_output=True, timeout=300)
    counts = {}
    for line in out.read_text().splitlines():
        f = line.split()
        if len(f) >= 5 and f[-1] in ("rename", "renameat2", "pwrite64", "fsync", "fdatasync",
                                     "unlink", "rmdir") and f[3].isdigit():
            counts[f[-1]] = int(f[3])
    return counts


@pytest.mark.skipif(shutil.which("strace") is None, reason="needs strace")
def test_a_resave_killed_at_each_rename_and_write_keeps_the_step(tmp_path):
    """Relaunching a finished examples/python/train.py re-saves its last step: SIGKILL it at each
    rename (the rank file, its manifest, COMMIT.json, the exchange, LATEST) and at spread points
    of every write and fsync; the step stays committed and intact, and the next launch ends with
    the same parameters."""
    args = ["--steps", "20", "--save-every", "10", "--workers", "0"]
    done = tmp_path / "done"
    run_train(done, *args, "--params-out", tmp_path / "ref.bin")
    ref = (tmp_path / "ref.bin").read_bytes()
    probe = tmp_path / "probe"
    shutil.copytree(done, probe)
    counts = _syscall_counts(probe, args)
    assert counts.get("renameat2", 0) >= 1  # the exchange of the re-save
    points = []
    for sc, n in sorted(counts.items()):
        every = 1 if sc in ("rename", "renameat2") else max(1, n // 3)
        points += [(sc, k) for k in range(1, n + 1, every)]
    killed = 0
    for sc, k in points:
        run = tmp_path / f"{sc}-{k}"
        shutil.copytree(done, run)
        p = subprocess.run(["strace", "-f", "-o", "/dev/null", "-e",
                            f"inject={sc}:signal=KILL:when={k}", sys.executable, str(TRAIN),
                            "--run-dir", str(run), *args],
                           env=ENV, capture_output=True, text=True, timeout=300)
        killed += p.returncode != 0
        assert _intact(run) == 20, f"killed at {sc} #{k}"
        shutil.rmtree(run)
    assert killed >= len(points) - 1  # every point but perhaps the last was reached
    # One relaunch after a kill at the exchange resumes bit-exact.
    run = tmp_path / "resume"
    shutil.copytree(done, run)
    subprocess.run(["strace", "-f", "-o", "/dev/null", "-e", "inject=renameat2:signal=KILL",
                    sys.executable, str(TRAIN), "--run-dir", str(run), *args],
                   env=ENV, capture_output=True, timeout=300)
    run_train(run, *args, "--params-out", tmp_path / "got.bin")
    assert (tmp_path / "got.bin").read_bytes() == ref
    assert _intact(run) == 20
    assert not (run / (STEP.format(20) + ".resave")).exists()


def test_two_checkpointers_of_one_process_take_turns(tmp_path):
    a, opt_a = _model(1024)
    b, opt_b = _model(1024)
    with torch.no_grad():
        b[0].weight.add_(1)
    first = ckpt.Checkpointer(tmp_path, keep_last=0).track(model=a, optimizer=opt_a)
    second = ckpt.Checkpointer(tmp_path, keep_last=0).track(model=b, optimizer=opt_b)
    for step in (10, 20, 30):
        first.save(step, blocking=False)
        second.save(step + (step == 30), blocking=False)  # the same step, then two steps
        first.wait()
        second.wait()
    first.close()
    second.close()
    assert _intact(tmp_path) == 31
    fresh, fresh_opt = _model(1024)
    with ckpt.Checkpointer(tmp_path) as ck:
        ck.track(model=fresh, optimizer=fresh_opt)
        ck.restore_latest()
    assert torch.equal(fresh[0].weight, b[0].weight)


@pytest.mark.parametrize("blocking", [True, False])
def test_a_run_directory_deleted_under_the_writer_fails_the_save(tmp_path, blocking):
    run = tmp_path / "run"
    model, opt = _model()
    ck = ckpt.Checkpointer(run).track(model=model, optimizer=opt)
    ck.save(1)
    shutil.rmtree(run)  # the "old" run removed while the job runs
    with pytest.raises(ckpt.CheckpointError, match="the run directory was removed or replaced"):
        ck.save(2, blocking=blocking)
        ck.wait()
    assert not run.exists()  # not re-created without its lock
    os.makedirs(run)
    holder = _holder(run)  # the relaunch that took a fresh lock
    try:
        with pytest.raises(ckpt.CheckpointError, match="removed or replaced"):
            ck.save(3, blocking=blocking)
            ck.wait()
        assert os.listdir(run) == ["LOCK"]
    finally:
        holder.kill()
        holder.wait()


def test_save_after_close_is_refused(tmp_path):
    model, opt = _model()
    ck = ckpt.Checkpointer(tmp_path).track(model=model, optimizer=opt)
    ck.save(1)
    ck.close()
    holder = _holder(tmp_path)
    try:
        for call in (lambda: ck.save(2), lambda: ck.save(2, blocking=False),
                     lambda: ck.restore_latest(), lambda: ck.log_progress(2, loss=0.0)):
            with pytest.raises(ckpt.CheckpointError, match="is closed"):
                call()
    finally:
        holder.kill()
        holder.wait()
    assert sorted(n for n in os.listdir(tmp_path) if n.startswith("step-")) == [STEP.format(1)]
    assert _intact(tmp_path) == 1


def test_the_lock_dies_with_the_process_that_took_it(tmp_path):
    """A trainer forks a worker that outlives it (as DataLoader workers do) and is SIGKILLed:
    the relaunch takes the lock at once, while the worker still runs. The trainer dies once the
    worker has started (its fork returned, so the fork handler that drops its copy of the lock
    has run: a worker never scheduled yet would hold it until it is)."""
    script = ("import os, signal, sys, time, ckpt\n"
              "ck = ckpt.Checkpointer(sys.argv[1])\n"
              "r, w = os.pipe()\n"
              "pid = os.fork()\n"
              "if pid == 0:\n"
              "    os.write(w, b'x'); time.sleep(20); os._exit(0)\n"
              "os.read(r, 1)\n"
              "print(pid, flush=True)\n"
              "os.kill(os.getpid(), signal.SIGKILL)\n")
    p = subprocess.Popen([sys.executable, "-c", script, str(tmp_path)], env=ENV,
                         stdout=subprocess.PIPE, text=True)
    worker = int(p.stdout.readline())
    assert p.wait() == -signal.SIGKILL
    try:
        os.kill(worker, 0)  # alive
        with ckpt.Checkpointer(tmp_path) as ck:  # no LockedError naming the dead trainer
            ck.track(model=_model()[0])
            ck.save(1)
    finally:
        os.kill(worker, signal.SIGKILL)
    assert _intact(tmp_path) == 1


def test_a_read_only_checkpointer_restores_a_live_run_and_writes_nothing(tmp_path):
    model, opt = _model()
    with ckpt.Checkpointer(tmp_path) as ck:
        ck.track(model=model, optimizer=opt)
        ck.save(7)
    journal = (tmp_path / "journal.jsonl").read_bytes()
    holder = _holder(tmp_path)
    try:
        with pytest.raises(ckpt.errors.LockedError, match=f"locked by pid {holder.pid} "):
            ckpt.Checkpointer(tmp_path)
        fresh, fresh_opt = _model()
        with torch.no_grad():
            fresh[0].weight.zero_()
        reader = ckpt.Checkpointer(tmp_path, read_only=True)
        reader.track(model=fresh, optimizer=fresh_opt)
        rep = reader.restore_latest()
        assert rep.restored and rep.step == 7
        assert torch.equal(fresh[0].weight, model[0].weight)
        with pytest.raises(ckpt.errors.InvalidArgumentError, match="read-only"):
            reader.save(8)
        with pytest.raises(ckpt.errors.InvalidArgumentError, match="read-only"):
            reader.log_progress(8, loss=0.0)
        reader.close()
    finally:
        holder.kill()
        holder.wait()
    assert (tmp_path / "journal.jsonl").read_bytes() == journal
    missing = tmp_path / "no-such-run"
    rep = ckpt.Checkpointer(missing, read_only=True).track(model=fresh).restore_latest()
    assert not rep.restored and not missing.exists()


def test_convert_refuses_a_global_step_no_checkpoint_can_have(tmp_path):
    src = tmp_path / "huge.pt"
    torch.save({"model": nn.Linear(2, 2).state_dict(), "global_step": 10**13}, src)
    out = tmp_path / "out"
    p = subprocess.run([str(BUILD / "cli" / "ckpt"), "convert", str(src), str(out)],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 65, p.stdout + p.stderr
    assert (f"{src}: global_step 10000000000000 cannot name a ckpt checkpoint (a step is in "
            "[0, 999999999999])") in p.stderr
    assert not out.exists() or os.listdir(out) == []
