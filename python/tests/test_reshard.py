"""A 2-rank DDP run (gloo) preempted mid-epoch and resumed at 3 ranks: the rest of the epoch is
covered exactly once — by the batch ids each rank recorded, and by `ckpt coverage` of the run."""
import json
import os
import pathlib
import socket
import subprocess
import sys
from collections import Counter

from conftest import BUILD

SCRIPT = pathlib.Path(__file__).with_name("dist_reshard.py")


def launch(run_dir, steps, stop_after, ids_out, world, n=100):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    procs = []
    for r in range(world):
        env = dict(os.environ, PYTHONPATH=str(BUILD / "python"), RANK=str(r),
                   WORLD_SIZE=str(world), MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
        procs.append(subprocess.Popen([sys.executable, str(SCRIPT), str(run_dir), str(steps),
                                       str(stop_after), str(ids_out), str(n)], env=env,
                                      stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    for p in procs:
        out, _ = p.communicate(timeout=300)
        assert p.returncode == 0, out


def records(ids_out, world):
    out = []
    for r in range(world):
        lines = pathlib.Path(f"{ids_out}-rank{r}.jsonl").read_text().splitlines()
        out.append([json.loads(ln) for ln in lines])
    return out


def test_two_rank_run_resumed_at_three_ranks_covers_the_epoch_once(tmp_path):
    run = tmp_path / "run"
    # 100 samples, 8 per rank: at 2 ranks 16 a step, so step 5 (a checkpoint) is position 80.
    launch(run, 8, 5, tmp_path / "w2", world=2)
    launch(run, 8, 0, tmp_path / "w3", world=3)
    w2, w3 = records(tmp_path / "w2", 2), records(tmp_path / "w3", 3)
    for rec in w3:
        assert rec[0] == {"restored": True, "step": 5, "world": 3}
    epoch0 = Counter()
    for rec in w2:
        steps = [e for e in rec[1:]]
        assert [e["step"] for e in steps] == [1, 2, 3, 4, 5]
        for e in steps:
            assert e["epoch"] == 0 and len(e["ids"]) == 8
            epoch0.update(e["ids"])
    assert len(epoch0) == 80  # disjoint across ranks and steps
    tail = Counter()
    for rec in w3:
        steps = rec[1:]
        assert [e["step"] for e in steps] == [6, 7, 8]
        assert steps[0]["epoch"] == 0 and steps[1]["epoch"] == 1 and steps[2]["epoch"] == 1
        tail.update(steps[0]["ids"][:len(steps[0]["ids"]) - steps[0]["pad"]])
    # the 20 left (positions 80-99), split over 3 ranks: 7, 6 + one of padding, 7 (docs/python.md)
    assert [len(rec[1]["ids"]) for rec in w3] == [7, 7, 7]
    assert [rec[1]["pad"] for rec in w3] == [0, 1, 0]
    epoch0.update(tail)
    assert sorted(epoch0) == list(range(100)) and set(epoch0.values()) == {1}
    epoch1 = Counter(i for rec in w3 for e in rec[2:] for i in e["ids"])
    assert len(epoch1) == 48 and set(epoch1.values()) == {1}  # 2 steps of 24, no repeats

    last = run / "step-000000000008"
    assert sorted(p.name for p in last.glob("rank-*.h5")) == [
        "rank-00000.h5", "rank-00001.h5", "rank-00002.h5"]
    cov = subprocess.run([str(BUILD / "cli" / "ckpt"), "coverage", str(run), "--json"],
                         capture_output=True, text=True)
    assert cov.returncode == 0, cov.stdout + cov.stderr
    j = json.loads(cov.stdout)
    e0, e1 = j["epochs"][0], j["epochs"][1]
    assert (e0["epoch"], e0["unique"], e0["visits"], e0["repeats"]) == (0, 100, 100, 0), j
    assert e0["never_visited_count"] == 0
    assert (e1["epoch"], e1["unique"], e1["visits"], e1["repeats"]) == (1, 48, 48, 0), j
    assert [c["ok"] for c in j["checkpoints"]] == [True] * len(j["checkpoints"]), j["checkpoints"]
