"""Non-blocking saves (docs/python.md, "Non-blocking saves"): save(step, blocking=False)
returns after the snapshot, so training may change every tensor while the file is written;
wait() raises a background failure as its ckpt.errors exception; close() waits."""
import json
import os

import pytest
import torch
from torch import nn

import ckpt
import ckpt._core as core


def _setup():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 8))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    return model, opt


def _train(model, opt, n):
    for _ in range(n):
        loss = model(torch.ones(4, 32)).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()


def _saves(run):
    return [json.loads(x) for x in core.read_journal(str(run))
            if json.loads(x)["event"] == "save"]


def test_the_checkpoint_holds_the_state_at_the_call(tmp_path):
    model, opt = _setup()
    _train(model, opt, 3)
    want = {k: v.clone() for k, v in model.state_dict().items()}
    want_opt = opt.state_dict()["state"][0]["exp_avg"].clone()
    with ckpt.Checkpointer(tmp_path) as ck:
        ck.track(model=model, optimizer=opt)
        info = ck.save(3, blocking=False)
        assert info["snapshot_bytes"] > 0 and info["stall_seconds"] >= 0
        _train(model, opt, 3)  # in place, while the background thread writes
        done = ck.wait()
        assert done["step"] == 3 and done["file_bytes"] > 0
        assert ck.wait() is None  # nothing in flight any more
    assert not torch.equal(model[0].weight, want["0.weight"])
    fresh, fresh_opt = _setup()
    _train(fresh, fresh_opt, 1)  # so the optimizer has state to load into
    with ckpt.Checkpointer(tmp_path) as ck:
        ck.track(model=fresh, optimizer=fresh_opt)
        rep = ck.restore_latest()
    assert rep.restored and rep.step == 3
    for k, v in fresh.state_dict().items():
        assert torch.equal(v, want[k]), k
    assert torch.equal(fresh_opt.state_dict()["state"][0]["exp_avg"], want_opt)
    assert not core.verify(os.path.join(str(tmp_path), "step-000000000003"))
    ev = _saves(tmp_path)
    assert [e.get("checkpoint") for e in ev] == ["step-000000000003", None]
    assert ev[0]["blocking"] is False and ev[1]["committed"] is True


def test_two_saves_in_a_row_both_commit_and_reuse_the_arena(tmp_path):
    model, opt = _setup()
    _train(model, opt, 1)
    with ckpt.Checkpointer(tmp_path, keep_last=0) as ck:
        ck.track(model=model, optimizer=opt)
        for step in (1, 2, 3):
            ck.save(step, blocking=False)  # no wait() in between
            _train(model, opt, 1)
        ck.wait()
        st = ck.background_stats()
    assert st["submitted"] == 3 and st["failed"] == 0
    assert st["arena_allocations"] == 1  # the same state: allocated once, reused
    nbytes = sum(t.numel() * t.element_size() for t in model.state_dict().values())
    assert st["arena_capacity"] >= 3 * nbytes  # model + exp_avg + exp_avg_sq
    assert core.find_latest(str(tmp_path))["step"] == 3
    for step in (1, 2, 3):
        assert not core.verify(os.path.join(str(tmp_path), f"step-{step:012d}"))
    waited = [e for e in _saves(tmp_path) if "waited_for_previous_seconds" in e]
    assert [e["step"] for e in waited] == [2, 3]


def test_a_background_failure_is_raised_by_wait_and_journaled(tmp_path):
    model, opt = _setup()
    ck = ckpt.Checkpointer(tmp_path)
    ck.track(model=model, optimizer=opt)
    ck.save(1)
    (tmp_path / "step-000000000002").write_text("in the way")  # mkdir of the step fails
    ck.save(2, blocking=False)
    with pytest.raises(ckpt.CheckpointError, match="background save of step 2: .*step-000000000002"):
        ck.wait()
    assert ck.wait() is None  # raised once
    assert _saves(tmp_path)[-1]["committed"] is False
    assert core.find_latest(str(tmp_path))["step"] == 1
    ck.save(3, blocking=False)
    ck.close()  # waits
    assert core.find_latest(str(tmp_path))["step"] == 3


def test_the_next_save_raises_the_failure_and_close_waits(tmp_path):
    model, opt = _setup()
    ck = ckpt.Checkpointer(tmp_path)
    ck.track(model=model, optimizer=opt)
    (tmp_path / "step-000000000001").write_text("in the way")
    ck.save(1, blocking=False)
    with pytest.raises(ckpt.CheckpointError, match="background save of step 1"):
        ck.save(2, blocking=False)
    with ck:
        ck.save(4, blocking=False)
    # __exit__ waited: committed, and the lock is free for another writer.
    assert core.find_latest(str(tmp_path))["step"] == 4
    with ckpt.Checkpointer(tmp_path) as again:
        again.track(model=model)
        assert again.restore_latest().step == 4


def test_tied_weights_saved_in_the_background_restore_tied(tmp_path):
    from test_digests_tied import TiedLM
    torch.manual_seed(0)
    src = TiedLM()
    opt = torch.optim.AdamW(src.parameters(), lr=1e-2)
    x = torch.randint(0, 50, (4, 5))

    def step():
        opt.zero_grad()
        src(x).logsumexp(-1).mean().backward()
        opt.step()

    step()
    want = {k: v.clone() for k, v in src.state_dict().items()}
    with ckpt.Checkpointer(tmp_path) as ck:
        ck.track(model=src, optimizer=opt)
        ck.save(1, blocking=False)
        step()  # changes the tied weight in place while it is written
    assert not core.verify(str(tmp_path / "step-000000000001"))
    torch.manual_seed(1)
    dst = TiedLM()
    with ckpt.Checkpointer(tmp_path) as ck:
        ck.track(model=dst)
        assert ck.restore_latest().step == 1
    assert dst.head.weight is dst.emb.weight
    for k, v in dst.state_dict().items():
        assert torch.equal(v, want[k]), k
