"""The proof of docs/python.md: a real training script stopped and resumed in fresh processes
ends bit-exact; each omission breaks it the way DOMAIN.md predicts."""
import subprocess

import pytest

from conftest import BUILD, progress, run_train

STEPS = 120


def test_straight_run_is_complete(straight):
    assert sorted(straight["progress"]) == list(range(1, STEPS + 1))


def test_resume_twice_is_bit_exact(straight, tmp_path):
    run = tmp_path / "run"
    # stop 1: after step 57; the latest checkpoint is step 50, mid-epoch (13 batches an epoch)
    out = run_train(run, "--stop-after", 57)
    assert "stopping after step 57" in out
    # stop 2: at step 78 = the end of epoch 5, saved there
    out = run_train(run, "--stop-after", 78, "--save-on-stop")
    assert "start at step 50" in out
    out = run_train(run, "--params-out", tmp_path / "params.bin")
    assert "start at step 78" in out
    assert (tmp_path / "params.bin").read_bytes() == straight["params"]
    got, want = progress(run), straight["progress"]
    assert sorted(got) == sorted(want)
    for step in want:
        for key in ("loss", "lr", "batch", "epoch", "position", "adam_step"):
            assert got[step][key] == want[step][key], (step, key)


def _omitted(tmp_path, component):
    run = tmp_path / "run"
    run_train(run, "--stop-after", 50, "--omit", component)
    out = run_train(run, "--stop-after", 56, "--omit", component)
    assert "start at step 50" in out
    return progress(run)


def _diverges(got, want):
    return any(got[s]["loss"] != want[s]["loss"] for s in range(51, 57))


def test_omit_scheduler_restarts_the_schedule(straight, tmp_path):
    got, want = _omitted(tmp_path, "scheduler"), straight["progress"]
    # the LR schedule restarts, back into warmup
    assert got[51]["lr"] == want[1]["lr"] != want[51]["lr"]
    assert got[51]["batch"] == want[51]["batch"]
    assert _diverges(got, want)


def test_omit_optimizer_restarts_the_moments(straight, tmp_path):
    got, want = _omitted(tmp_path, "optimizer"), straight["progress"]
    # Adam's moments (and its step count) restart from zero
    assert want[51]["adam_step"] == 51 and got[51]["adam_step"] == 1
    assert got[51]["lr"] == want[51]["lr"] and got[51]["batch"] == want[51]["batch"]
    assert _diverges(got, want)


def test_omit_loader_replays_the_head_of_the_dataset(straight, tmp_path):
    got, want = _omitted(tmp_path, "loader"), straight["progress"]
    # the epoch restarts from sample 0: the head is seen again, and no LR bump shows it
    assert [got[s]["batch"] for s in range(51, 57)] == [want[s]["batch"] for s in range(1, 7)]
    assert (got[51]["epoch"], got[51]["position"]) == (0, 0)
    assert got[51]["lr"] == want[51]["lr"]


def test_omit_rng_changes_dropout(straight, tmp_path):
    got, want = _omitted(tmp_path, "rng"), straight["progress"]
    # same data, same LR, same moments: only the random streams (dropout) differ
    assert got[51]["batch"] == want[51]["batch"] and got[51]["lr"] == want[51]["lr"]
    assert got[51]["adam_step"] == want[51]["adam_step"]
    assert got[51]["loss"] != want[51]["loss"]


def test_cli_verify_and_audit_read_it(straight):
    step_dir = straight["run"] / "step-000000000120"
    v = subprocess.run([str(BUILD / "cli" / "ckpt"), "verify", str(step_dir)],
                       capture_output=True, text=True)
    assert v.returncode == 0, v.stdout + v.stderr
    assert v.stdout.startswith("ok")
    a = subprocess.run([str(BUILD / "cli" / "ckpt"), "audit", str(straight["run"])],
                       capture_output=True, text=True)
    assert "/model holds 4 tensors" in a.stdout, a.stdout + a.stderr
    assert "/loader epoch 9, position 48 of 200" in a.stdout
    assert "/train global_step 120" in a.stdout
    assert "/rng/cpu/state uint8" in a.stdout
    # torch's own optimizer/scheduler layout is judged like a torch.save file: complete, exit 0.
    assert a.returncode == 0 and "COMPLETE" in a.stdout, a.stdout + a.stderr
    assert "optimizer: Adam/AdamW state for 4 of 4 params, 1 param group(s)" in a.stdout
    assert "scheduler: LambdaLR last_epoch 120" in a.stdout
    lr = subprocess.run([str(BUILD / "cli" / "ckpt"), "lr", str(straight["run"])],
                        capture_output=True, text=True)
    assert lr.returncode == 0 and "120 points, steps 1..120" in lr.stdout, lr.stdout + lr.stderr
    cov = subprocess.run([str(BUILD / "cli" / "ckpt"), "coverage", str(straight["run"])],
                         capture_output=True, text=True)
    assert cov.returncode == 0, cov.stdout + cov.stderr
    rows = [ln.split() for ln in cov.stdout.splitlines() if ln[:1].isdigit()]
    assert [r[1] for r in rows[:9]] == ["200"] * 9, cov.stdout  # epochs 0-8 each seen once
