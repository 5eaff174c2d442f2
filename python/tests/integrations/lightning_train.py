"""A small MLP with dropout trained by Lightning on CPU, for test_lightning.py and
bench/integrations_bench.py: accumulate_grad_batches=2, 2 DataLoader workers, ModelCheckpoint
every 3 steps with save_last.

    lightning_train.py --mode ckpt|own --out DIR [--kill-at STEP] [--resume] [--devices N]

--mode ckpt: Trainer(plugins=[CkptIO()]) and ckpt.integrations.lightning.ResumableLoader; --mode
own: Lightning's own .ckpt files and a shuffling torch DataLoader. --resume: fit(ckpt_path="last").
Every micro-batch's loss goes to DIR/losses.txt as "<global step> <loss>" (rank 0), the final
parameters to DIR/params.bin, a summary to DIR/result.json. --kill-at STEP SIGKILLs the process
when optimizer step STEP has ended.

--devices 2: DDP over gloo on CPU with strategy="ddp", whose launcher starts this script again
as rank 1 (LOCAL_RANK=1 in its environment); every rank kills itself at --kill-at, rank R > 0
writes its losses to DIR/losses-rank<R>.txt, and in setup() (after Lightning's reset_seed, before
a checkpoint is loaded) each rank reseeds with 1000 + R, so the ranks draw different dropout
masks and a resume must give every rank its own RNG back."""
import argparse
import json
import os
import signal
import sys
import time

import torch

torch.set_num_threads(1)

import lightning.pytorch as pl  # noqa: E402
from lightning.pytorch.callbacks import ModelCheckpoint  # noqa: E402

if torch.__version__.startswith("1.13") and sys.version_info >= (3, 11):
    # torch 1.13 predates Python 3.11: importing torch.distributed._shard fails there (a
    # dataclass with a mutable default), and Lightning 2.2's LightningModule imports it for
    # ShardedTensor hooks this script has no use for.
    pl.LightningModule._register_sharded_tensor_state_dict_hooks_if_available = (
        lambda self: None)


class Points(torch.utils.data.Dataset):
    def __init__(self, n=64):
        g = torch.Generator().manual_seed(1234)
        self.x = torch.randn(n, 8, generator=g)
        self.y = self.x.sum(1, keepdim=True).sin()

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        return self.x[i] + 0.01 * torch.randn(8), self.y[i]  # augmentation: draws in the worker


def mlp(width, hidden):
    """Linear(8, width), ReLU, Dropout, `hidden` times (Linear(width, width), ReLU), then
    Linear(width, 1): the tests' model at width 32, hidden 0; bench/integrations_bench.py's
    wider one."""
    layers = [torch.nn.Linear(8, width), torch.nn.ReLU(), torch.nn.Dropout(0.2)]
    for _ in range(hidden):
        layers += [torch.nn.Linear(width, width), torch.nn.ReLU()]
    return torch.nn.Sequential(*layers, torch.nn.Linear(width, 1))


class Net(pl.LightningModule):
    def __init__(self, losses, width=32, hidden=0):
        super().__init__()
        self.net = mlp(width, hidden)
        self.losses = losses

    def setup(self, stage):
        if self.trainer.world_size > 1:
            torch.manual_seed(1000 + self.trainer.global_rank)  # module docstring

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = torch.nn.functional.mse_loss(self.net(x), y)
        self.losses.write(f"{self.trainer.global_step} {loss.item()!r}\n")
        self.losses.flush()
        return loss

    def configure_optimizers(self):
        opt = torch.optim.AdamW(self.parameters(), lr=1e-2)
        sched = torch.optim.lr_scheduler.StepLR(opt, step_size=4, gamma=0.5)
        return {"optimizer": opt, "lr_scheduler": {"scheduler": sched, "interval": "step"}}


class FirstStep(pl.Callback):
    """When the first batch of this process starts training (bench/integrations_bench.py)."""
    at = None

    def on_train_batch_start(self, trainer, module, batch, batch_idx):
        if self.at is None:
            self.at = time.perf_counter()


class KillAt(pl.Callback):
    def __init__(self, step):
        self.step = step

    def on_train_batch_end(self, trainer, module, outputs, batch, batch_idx):
        if trainer.global_step == self.step:
            sys.stdout.flush()
            os.kill(os.getpid(), signal.SIGKILL)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mode", choices=("ckpt", "own"), required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--kill-at", type=int, default=0)
    ap.add_argument("--resume", action="store_true")
    ap.add_argument("--max-steps", type=int, default=14)
    ap.add_argument("--devices", type=int, default=1)
    ap.add_argument("--width", type=int, default=32)
    ap.add_argument("--hidden-layers", type=int, default=0)
    ap.add_argument("--save-steps", type=int, default=3)
    ap.add_argument("--blocking", action="store_true")  # CkptIO(blocking=True)
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    pl.seed_everything(0)
    rank = int(os.environ.get("LOCAL_RANK", "0"))  # set for the ranks the launcher starts
    losses = open(os.path.join(a.out, "losses.txt" if rank == 0 else f"losses-rank{rank}.txt"),
                  "a")
    losses.write(f"# process {os.getpid()}\n")
    model = Net(losses, a.width, a.hidden_layers)
    callbacks = [ModelCheckpoint(dirpath=os.path.join(a.out, "checkpoints"),
                                 every_n_train_steps=a.save_steps, save_last=True,
                                 save_top_k=0)]
    first_step = FirstStep()
    callbacks.append(first_step)
    if a.kill_at:
        callbacks.append(KillAt(a.kill_at))
    plugins = []
    if a.mode == "ckpt":
        from ckpt.integrations.lightning import CkptIO, ResumableLoader
        plugins.append(CkptIO(blocking=a.blocking))
        loader = ResumableLoader(Points(), batch_size=4, seed=0, num_workers=2)
    else:
        loader = torch.utils.data.DataLoader(Points(), batch_size=4, shuffle=True,
                                             num_workers=2)
    trainer = pl.Trainer(max_steps=a.max_steps, accumulate_grad_batches=2, accelerator="cpu",
                         devices=a.devices, strategy="ddp" if a.devices > 1 else "auto",
                         logger=False, enable_progress_bar=False, enable_model_summary=False,
                         num_sanity_val_steps=0, callbacks=callbacks, plugins=plugins)
    # Timings for bench/integrations_bench.py: each save's stall on the training thread (the
    # checkpoint dict and its write: trainer.save_checkpoint, which ModelCheckpoint calls), and
    # the time from fit() to the first batch (a resume's loading included).
    stalls = []
    save = trainer.save_checkpoint

    def timed_save(*args, **kwargs):
        t = time.perf_counter()
        try:
            return save(*args, **kwargs)
        finally:
            stalls.append(time.perf_counter() - t)

    trainer.save_checkpoint = timed_save
    t0 = time.perf_counter()
    trainer.fit(model, train_dataloaders=loader, ckpt_path="last" if a.resume else None)
    seconds = time.perf_counter() - t0
    losses.close()
    if trainer.is_global_zero:
        with open(os.path.join(a.out, "params.bin"), "wb") as f:
            for k, v in sorted(model.state_dict().items()):
                f.write(v.detach().contiguous().numpy().tobytes())
        with open(os.path.join(a.out, "result.json"), "w") as f:
            json.dump({"global_step": trainer.global_step, "seconds": seconds,
                       "loader_world_size": getattr(loader, "world_size", None),
                       "save_stalls": stalls, "to_first_step": first_step.at - t0,
                       "versions": {"lightning": pl.__version__, "torch": torch.__version__}},
                      f)


if __name__ == "__main__":
    main()
