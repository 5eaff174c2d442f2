"""A small MLP with dropout trained by a hand-written Accelerate loop on CPU, for
test_accelerate.py and bench/integrations_bench.py: gradient_accumulation_steps=2, 2 DataLoader
workers, save every 3 steps.

    accelerate_train.py --mode ckpt|own --out DIR [--kill-at STEP]

--mode ckpt: ckpt.integrations.accelerate.save_state/load_state and a ckpt.ResumableLoader
registered for checkpointing; --mode own: Accelerator.save_state/load_state with automatic
checkpoint naming and a prepared shuffling DataLoader, resumed as Accelerate's examples do
(skip_first_batches over the batches of the epoch already trained). Both resume from DIR when
a checkpoint is there. Every micro-batch's loss goes to DIR/losses.txt as "<step> <loss>", the
parameters to DIR/params.bin, a summary to DIR/result.json. --kill-at STEP SIGKILLs the process
after optimizer step STEP.

Under torchrun (WORLD_SIZE > 1) it is a DDP run over gloo on CPU (Accelerate's MULTI_CPU): every
rank kills itself at --kill-at, rank R > 0 writes its losses to DIR/losses-rank<R>.txt (rank 0
writes params.bin and result.json), and each rank reseeds its RNGs with 1000 + R after set_seed,
so the ranks draw different dropout masks and a resume must give every rank its own RNG back."""
import argparse
import json
import os
import signal
import sys
import time

import torch

torch.set_num_threads(1)

import accelerate  # noqa: E402
from accelerate import Accelerator  # noqa: E402
from accelerate.utils import ProjectConfiguration, set_seed  # noqa: E402


class Points(torch.utils.data.Dataset):
    def __init__(self, n=64):
        g = torch.Generator().manual_seed(1234)
        self.x = torch.randn(n, 8, generator=g)
        self.y = self.x.sum(1, keepdim=True).sin()

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        return self.x[i] + 0.01 * torch.randn(8), self.y[i]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mode", choices=("ckpt", "own"), required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--kill-at", type=int, default=0)
    ap.add_argument("--max-steps", type=int, default=14)
    ap.add_argument("--width", type=int, default=32)
    ap.add_argument("--hidden-layers", type=int, default=0)
    ap.add_argument("--non-blocking", action="store_true")  # ckpt's save_state(blocking=False)
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    set_seed(0)
    acc = Accelerator(gradient_accumulation_steps=2, cpu=True,
                      project_config=ProjectConfiguration(
                          project_dir=a.out, automatic_checkpoint_naming=True))
    rank = acc.process_index
    if acc.num_processes > 1:
        torch.manual_seed(1000 + rank)  # each rank its own RNG streams (module docstring)
    layers = [torch.nn.Linear(8, a.width), torch.nn.ReLU(), torch.nn.Dropout(0.2)]
    for _ in range(a.hidden_layers):  # 0 in the tests; bench/integrations_bench.py's wider model
        layers += [torch.nn.Linear(a.width, a.width), torch.nn.ReLU()]
    model = torch.nn.Sequential(*layers, torch.nn.Linear(a.width, 1))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=4, gamma=0.5)
    # Timings for bench/integrations_bench.py: each save's stall, and the time from before the
    # load to the first batch (loading and, for Accelerate's own, skipping batches included).
    stalls, t_start, first_batch = [], time.perf_counter(), None
    if a.mode == "ckpt":
        import ckpt
        from ckpt.integrations.accelerate import close, load_state, save_state
        loader = ckpt.ResumableLoader(Points(), batch_size=4, seed=0, num_workers=2)
        model, opt, sched = acc.prepare(model, opt, sched)
        acc.register_for_checkpointing(loader)
        t0 = time.perf_counter()
        step = load_state(acc, os.path.join(a.out, "run")).step
        resume_seconds = time.perf_counter() - t0
        skip = 0
    else:
        loader = torch.utils.data.DataLoader(Points(), batch_size=4, shuffle=True,
                                             num_workers=2)
        model, opt, sched, loader = acc.prepare(model, opt, sched, loader)
        step, skip, resume_seconds = 0, 0, 0.0
        folder = os.path.join(a.out, "checkpoints")
        if os.path.isdir(folder) and os.listdir(folder):
            newest = max(os.listdir(folder), key=lambda d: int(d.split("_")[-1]))
            t0 = time.perf_counter()
            acc.load_state(os.path.join(folder, newest))
            # the next save is checkpoint_N+1 (Accelerate leaves that to the caller)
            acc.project_configuration.iteration = int(newest.split("_")[-1]) + 1
            resume_seconds = time.perf_counter() - t0
            step = json.load(open(os.path.join(folder, newest, "step.json")))["step"]
    per_epoch = len(Points()) // 4 // 2 // acc.num_processes  # optimizer steps per epoch
    losses = open(os.path.join(a.out, "losses.txt" if rank == 0 else f"losses-rank{rank}.txt"),
                  "a")
    losses.write(f"# process {os.getpid()}\n")
    epoch = step // per_epoch if a.mode == "own" else 0
    skip = (step % per_epoch) * 2 if a.mode == "own" else 0
    t0 = time.perf_counter()
    while step < a.max_steps:
        it = loader
        if a.mode == "own":
            loader.set_epoch(epoch)
            if skip:
                it = acc.skip_first_batches(loader, skip)
                skip = 0
        for x, y in it:
            if first_batch is None:
                first_batch = time.perf_counter()
            with acc.accumulate(model):
                loss = torch.nn.functional.mse_loss(model(x), y)
                losses.write(f"{step} {loss.item()!r}\n")
                losses.flush()
                acc.backward(loss)
                opt.step()
                sched.step()
                opt.zero_grad()
            if acc.sync_gradients:
                step += 1
                if step % 3 == 0:
                    t = time.perf_counter()
                    if a.mode == "ckpt":
                        save_state(acc, os.path.join(a.out, "run"), step=step,
                                   blocking=not a.non_blocking)
                    else:
                        where = acc.save_state()
                        json.dump({"step": step}, open(os.path.join(where, "step.json"), "w"))
                    stalls.append(time.perf_counter() - t)
                if step == a.kill_at:
                    sys.stdout.flush()
                    os.kill(os.getpid(), signal.SIGKILL)
                if step == a.max_steps:
                    break
        epoch += 1
    seconds = time.perf_counter() - t0
    if a.mode == "ckpt":
        close(acc)
    losses.close()
    if rank > 0:
        return
    with open(os.path.join(a.out, "params.bin"), "wb") as f:
        for k, v in sorted(acc.unwrap_model(model).state_dict().items()):
            f.write(v.detach().contiguous().numpy().tobytes())
    with open(os.path.join(a.out, "result.json"), "w") as f:
        json.dump({"step": step, "seconds": seconds, "resume_seconds": resume_seconds,
                   "save_stalls": stalls, "to_first_step": first_batch - t_start,
                   "versions": {"accelerate": accelerate.__version__,
                                "torch": torch.__version__}}, f)


if __name__ == "__main__":
    main()
