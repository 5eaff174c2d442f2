"""CUDA tensors through the Python package: saved from pinned host copies (blocking and
non-blocking), restored bit for bit into CUDA modules and optimizers, the CUDA generator
included. Skipped without a GPU (bench/gpu_resume.sh --with-python runs it on one)."""
import pytest
import torch
from torch import nn

import ckpt

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")


def make(seed):
    torch.manual_seed(seed)
    model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 8)).cuda()
    return model, torch.optim.AdamW(model.parameters(), lr=1e-3)


def train(model, opt, steps):
    for _ in range(steps):
        opt.zero_grad()
        x = torch.randn(16, 64, device="cuda")
        nn.functional.dropout(model(x), 0.1).pow(2).mean().backward()
        opt.step()


@pytest.mark.parametrize("blocking", [True, False])
def test_cuda_state_round_trips_and_training_continues_identically(tmp_path, blocking):
    model, opt = make(0)
    train(model, opt, 3)
    with ckpt.Checkpointer(tmp_path) as ck:
        ck.track(model=model, optimizer=opt)
        ck.save(3, blocking=blocking)
        train(model, opt, 2)  # the saved bytes are the ones of step 3, not these
    model, opt = make(0)
    train(model, opt, 3)
    want = [p.detach().clone() for p in model.parameters()]
    cuda_rng = torch.cuda.get_rng_state()
    train(model, opt, 2)
    ref = [p.detach().clone() for p in model.parameters()]

    fresh, fresh_opt = make(1)
    torch.cuda.manual_seed(99)
    with ckpt.Checkpointer(tmp_path) as ck:
        ck.track(model=fresh, optimizer=fresh_opt)
        rep = ck.restore_latest()
    assert rep.restored and rep.step == 3
    assert all(p.is_cuda for p in fresh.parameters())
    assert all(torch.equal(a, b) for a, b in zip(want, fresh.parameters()))
    assert torch.equal(torch.cuda.get_rng_state(), cuda_rng)
    train(fresh, fresh_opt, 2)
    assert all(torch.equal(a, b) for a, b in zip(ref, fresh.parameters()))
