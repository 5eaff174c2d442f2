"""2 processes with torch.distributed (gloo) and DDP: each rank writes its own file, rank 0
commits after the barrier; stop and resume in fresh processes is bit-exact. The DDP module's
tensors and its optimizer's are written once, each by one rank (docs/python.md, "DDP")."""
import json
import os
import pathlib
import socket
import subprocess
import sys

from ckpt import _core as core
from conftest import BUILD

SCRIPT = pathlib.Path(__file__).with_name("dist_train.py")


def launch(run_dir, steps, stop_after, params_out, world=2, extra=(), fails=False):
    """Runs dist_train.py on `world` ranks; returns their outputs. fails: every rank must exit
    with an error."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    procs = []
    for r in range(world):
        env = dict(os.environ, PYTHONPATH=str(BUILD / "python"), RANK=str(r),
                   WORLD_SIZE=str(world), MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
        procs.append(subprocess.Popen([sys.executable, str(SCRIPT), str(run_dir), str(steps),
                                       str(stop_after), str(params_out), *extra], env=env,
                                      stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    outs = []
    for p in procs:
        out, _ = p.communicate(timeout=300)
        assert (p.returncode != 0) if fails else (p.returncode == 0), out
        outs.append(out)
    return outs


def test_two_ranks_stop_and_resume_bit_exact(tmp_path):
    launch(tmp_path / "straight", 30, 0, tmp_path / "straight.bin")
    launch(tmp_path / "resumed", 30, 17, tmp_path / "unused.bin")  # latest: step 15, mid-epoch
    step = tmp_path / "resumed" / "step-000000000015"
    assert sorted(p.name for p in step.glob("rank-*.h5")) == ["rank-00000.h5", "rank-00001.h5"]
    stored_once(step, "/model/")
    launch(tmp_path / "resumed", 30, 0, tmp_path / "resumed.bin")
    assert (tmp_path / "resumed.bin").read_bytes() == (tmp_path / "straight.bin").read_bytes()
    last = tmp_path / "resumed" / "step-000000000030"  # retention removed 15 (keep_last=3)
    assert not step.exists()
    v = subprocess.run([str(BUILD / "cli" / "ckpt"), "verify", str(last)], capture_output=True,
                       text=True)
    assert v.returncode == 0, v.stdout + v.stderr


def test_two_ranks_non_blocking_saves_bit_exact(tmp_path):
    # Each rank writes its file in the background; barrier + commit run on the training thread
    # at the next save and at close (docs/distributed.md, "Non-blocking saves with several ranks").
    launch(tmp_path / "straight", 30, 0, tmp_path / "straight.bin")
    launch(tmp_path / "resumed", 30, 17, tmp_path / "unused.bin", extra=("async",))
    step = tmp_path / "resumed" / "step-000000000015"
    assert (step / "COMMIT.json").exists()  # committed at close, after the stop at 17
    launch(tmp_path / "resumed", 30, 0, tmp_path / "resumed.bin", extra=("async",))
    assert (tmp_path / "resumed.bin").read_bytes() == (tmp_path / "straight.bin").read_bytes()
    last = tmp_path / "resumed" / "step-000000000030"
    v = subprocess.run([str(BUILD / "cli" / "ckpt"), "verify", str(last)], capture_output=True,
                       text=True)
    assert v.returncode == 0, v.stdout + v.stderr


ONE_COPY = 4 * (8 * 512 + 512 + 512 * 512 + 512 + 512 + 1) * 3  # parameters and two moments


def stored_once(step_dir, model_prefix, ranks=2):
    """The INDEX holds every parameter and moment as one box: one copy of each in the step, the
    512 x 512 ones spread over every rank file."""
    idx = core.read_index(str(step_dir))
    names = {t["name"]: t for t in idx["tensors"]}
    assert len([n for n in names if n.startswith(model_prefix)]) == 6
    assert len([n for n in names if n.startswith("/optimizer/state/")]) == 12  # not the steps
    total = 0
    for t in idx["tensors"]:
        assert t["placement"] == "replicated" and len(t["boxes"]) == 1, t
        assert t["boxes"][0]["sizes"] == t["shape"]
        size = core.DTYPES[t["dtype"]][0]
        for s in t["shape"]:
            size *= s
        total += size
    assert total == ONE_COPY
    assert {t["boxes"][0]["file"] for t in idx["tensors"]} == {f"rank-{r:05d}.h5"
                                                              for r in range(ranks)}


def test_a_tracked_ddp_module_is_found_replicated(tmp_path):
    launch(tmp_path / "run", 10, 0, tmp_path / "p.bin", extra=("ddp",))
    step = tmp_path / "run" / "step-000000000010"
    stored_once(step, "/model/module.")
    a = subprocess.run([str(BUILD / "cli" / "ckpt"), "audit", str(step)], capture_output=True,
                       text=True)
    assert a.returncode == 0, a.stdout + a.stderr
    # Written once over two files, restored by one rank (each tensor from the file that owns it),
    # and trained on: the next checkpoint is one rank's whole state again.
    launch(tmp_path / "run", 15, 0, tmp_path / "p.bin", world=1, extra=("ddp",))
    last = tmp_path / "run" / "step-000000000015"
    assert sorted(p.name for p in last.glob("rank-*.h5")) == ["rank-00000.h5"]
    v = subprocess.run([str(BUILD / "cli" / "ckpt"), "verify", str(last)], capture_output=True,
                       text=True)
    assert v.returncode == 0, v.stdout + v.stderr
    # and at 3 ranks, each reading every replicated tensor from the one file that holds it
    launch(tmp_path / "run", 20, 0, tmp_path / "p.bin", world=3, extra=("ddp",))
    stored_once(tmp_path / "run" / "step-000000000020", "/model/module.", ranks=3)
    # saved from the DDP module ("module." keys), restored into ddp.module: matched by name
    launch(tmp_path / "run", 25, 0, tmp_path / "p.bin", world=1)
    events = [json.loads(line) for line in (tmp_path / "run" / "journal.jsonl").open()]
    last = [e for e in events if e["event"] == "restore"][-1]
    assert last["step"] == 20 and 'saved with keys under "module."' in last["note"], last


def test_a_declared_component_the_ranks_hold_differently_is_refused(tmp_path):
    """replicated=("model",) while rank 1's weight differs: written once, rank 1 would come back
    with rank 0's values. The first save checks, and every rank raises before writing."""
    outs = launch(tmp_path / "run", 10, 0, tmp_path / "p.bin", extra=("diverge",), fails=True)
    for out in outs:
        assert ('/model/3.weight: component "model" is written once as held alike by ranks '
                '[0, 1], but rank 1 holds other values than rank 0 (nothing was saved)'
                in out), out[-3000:]
    assert not list((tmp_path / "run").glob("step-*/COMMIT.json"))
    # undeclared, the same run saves a copy per rank and restores each rank's own
    launch(tmp_path / "own", 10, 0, tmp_path / "p.bin", extra=("diverge", "per-rank"))


def test_undeclared_modules_stay_per_rank_and_a_lost_owner_file_is_named(tmp_path):
    """Without replicated= every rank writes a whole copy, so one rank file restores at 1 rank;
    written once, the file rank 1 owned is lost with its tensor, and restore and verify say so."""
    for mode, extra in (("once", ()), ("per-rank", ("per-rank",))):
        launch(tmp_path / mode, 10, 0, tmp_path / "p.bin", extra=extra)
    per_rank = tmp_path / "per-rank" / "step-000000000010"
    assert not (per_rank / "INDEX").exists()
    for r in (0, 1):
        assert (per_rank / f"rank-{r:05d}.h5").stat().st_size > ONE_COPY
        assert core.OpenRank(str(per_rank), r).tree["attrs"]["format_version"] == 1
    once = tmp_path / "once" / "step-000000000010"
    assert (once / "rank-00001.h5").stat().st_size < ONE_COPY / 2
    for mode in ("once", "per-rank"):
        (tmp_path / mode / "step-000000000010" / "rank-00001.h5").unlink()
    launch(tmp_path / "per-rank", 15, 0, tmp_path / "p.bin", world=1, extra=("per-rank",))
    try:
        launch(tmp_path / "once", 15, 0, tmp_path / "p.bin", world=1)
    except AssertionError as e:
        assert ('tensor "/optimizer/state/2/exp_avg" loses all 262144 of 262144 elements'
                in str(e)) and "nothing was restored" in str(e), str(e)[-2000:]
    else:
        raise AssertionError("restored without the rank file that held a tensor")
    v = subprocess.run([str(BUILD / "cli" / "ckpt"), "verify", str(once)], capture_output=True,
                       text=True)
    assert v.returncode == 2 and '"/optimizer/state/2/exp_avg" loses all' in v.stdout, v.stdout
