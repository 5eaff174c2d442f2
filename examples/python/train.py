"""A PyTorch training script of the usual shape, checkpointed with ckpt (docs/python.md).

An MLP with dropout, AdamW, a LambdaLR warmup + cosine schedule, a dataset whose __getitem__
draws random augmentation from torch, numpy and random, and a ckpt.ResumableLoader with worker
processes. Stop it at any step and start it again: it resumes from the latest checkpoint and
ends with the same parameters, bit for bit, as a run that was never interrupted.

    PYTHONPATH=build/python python3 examples/python/train.py --run-dir /tmp/run --stop-after 57
    PYTHONPATH=build/python python3 examples/python/train.py --run-dir /tmp/run
    build/cli/ckpt audit /tmp/run
"""
import argparse
import math
import random
import sys

import numpy as np
import torch
from torch import nn

import ckpt


class NoisyDataset(torch.utils.data.Dataset):
    """Fixed features and targets, plus augmentation drawn from all three global RNGs."""

    def __init__(self, n=200, dim=16):
        g = torch.Generator().manual_seed(1234)  # the data itself is fixed
        self.x = torch.randn(n, dim, generator=g)
        self.y = self.x @ torch.randn(dim, 1, generator=g) + 0.1 * torch.randn(n, 1, generator=g)

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        noise = 0.05 * torch.randn(self.x.shape[1])                      # torch
        noise += 0.05 * torch.from_numpy(np.random.normal(size=self.x.shape[1])).float()  # numpy
        scale = 1.0 + 0.1 * (random.random() - 0.5)                      # random
        return (self.x[i] + noise) * scale, self.y[i], i


def warmup_cosine(warmup, total):
    def f(step):
        if step < warmup:
            return (step + 1) / warmup
        return 0.5 * (1 + math.cos(math.pi * (step - warmup) / max(1, total - warmup)))
    return f


def main(argv=None):
    p = argparse.ArgumentParser()
    p.add_argument("--run-dir", required=True)
    p.add_argument("--steps", type=int, default=120)
    p.add_argument("--save-every", type=int, default=10)
    p.add_argument("--stop-after", type=int, default=0, help="exit after this step (0: never)")
    p.add_argument("--save-on-stop", action="store_true", help="save before exiting there")
    p.add_argument("--omit", default="", help="comma-separated components to leave out")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--params-out", default="", help="write the final parameters' bytes here")
    a = p.parse_args(argv)

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Dropout(0.2), nn.Linear(64, 1))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.01)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, warmup_cosine(10, a.steps))
    loader = ckpt.ResumableLoader(NoisyDataset(), batch_size=16, seed=7, num_workers=a.workers)

    omit = tuple(x for x in a.omit.split(",") if x)
    with ckpt.Checkpointer(a.run_dir, keep_last=3, omit=omit) as ck:
        ck.track(model=model, optimizer=opt, scheduler=sched, loader=loader)
        rep = ck.restore_latest()          # rng first, then everything tracked
        step = rep.step
        print(f"start at step {step} (restored: {rep.components}, missing: {rep.missing})")
        model.train()
        while step < a.steps:
            for x, y, ids in loader:       # one loop = the rest of the current epoch
                step += 1
                loss = nn.functional.mse_loss(model(x), y)
                opt.zero_grad()
                loss.backward()
                opt.step()
                lr = sched.get_last_lr()[0]
                sched.step()
                adam_step = int(opt.state[model[0].weight]["step"])
                ck.log_progress(step, lr=lr, loss=loss.item(), batch=ids.tolist(),
                                adam_step=adam_step)
                if step % a.save_every == 0 or (step == a.stop_after and a.save_on_stop):
                    ck.save(step, blocking=False)
                if step == a.stop_after:
                    print(f"stopping after step {step}")
                    return 0
                if step == a.steps:
                    break
        ck.save(step)
    if a.params_out:
        flat = torch.cat([t.detach().flatten() for t in model.state_dict().values()])
        with open(a.params_out, "wb") as f:
            f.write(flat.numpy().tobytes())
    return 0


if __name__ == "__main__":
    sys.exit(main())
