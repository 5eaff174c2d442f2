"""A tiny GPT-2 (from a config) trained by transformers.Trainer on CPU, for test_hf.py and
bench/integrations_bench.py: gradient accumulation 2, 2 DataLoader workers, dropout on.

    hf_train.py --mode ckpt|hf --out DIR [--kill-at STEP] [--resume] [--max-steps N]

--mode ckpt checkpoints with ckpt.integrations.hf.CkptCallback (run directory DIR/run); --mode hf
with the Trainer's own checkpoint-N folders (DIR/hf), resumed with resume_from_checkpoint=True
when --resume is given. Every micro-batch's loss is appended to DIR/losses.txt as
"<global step> <loss>"; at the end the model's tensors go to DIR/params.bin and a summary to
DIR/result.json. --kill-at STEP SIGKILLs the process at the end of optimizer step STEP.

Under torchrun (WORLD_SIZE > 1) it is a DDP run over gloo on CPU: every rank kills itself at
--kill-at, rank R > 0 writes its losses to DIR/losses-rank<R>.txt, and each rank reseeds its
RNGs with 1000 + R after the Trainer's set_seed, so the ranks draw different dropout masks and a
resume must give every rank its own RNG back."""
import argparse
import json
import os
import signal
import sys
import time

import torch

torch.set_num_threads(1)

import transformers  # noqa: E402
from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainingArguments  # noqa: E402


class Tokens(torch.utils.data.Dataset):
    def __init__(self, n=64, length=16, vocab=64):
        g = torch.Generator().manual_seed(1234)
        self.data = torch.randint(0, vocab, (n, length), generator=g)

    def __len__(self):
        return len(self.data)

    def __getitem__(self, i):
        return {"input_ids": self.data[i], "labels": self.data[i]}


class Recording(Trainer):
    losses = None

    def compute_loss(self, model, inputs, return_outputs=False):
        out = super().compute_loss(model, inputs, return_outputs)
        loss = out[0] if return_outputs else out
        self.losses.write(f"{self.state.global_step} {loss.item()!r}\n")
        self.losses.flush()
        return out


class KillAt(transformers.TrainerCallback):
    def __init__(self, step):
        self.step = step

    def on_step_end(self, args, state, control, **kwargs):
        if state.global_step == self.step:
            sys.stdout.flush()
            os.kill(os.getpid(), signal.SIGKILL)
        return control


class FirstStep(transformers.TrainerCallback):
    at = None

    def on_step_begin(self, args, state, control, **kwargs):
        if self.at is None:
            self.at = time.perf_counter()
        return control


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mode", choices=("ckpt", "hf"), required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--kill-at", type=int, default=0)
    ap.add_argument("--resume", action="store_true")
    ap.add_argument("--max-steps", type=int, default=14)
    ap.add_argument("--save-steps", type=int, default=3)
    ap.add_argument("--blocking", action="store_true")
    ap.add_argument("--n-embd", type=int, default=32)
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    world, rank = int(os.environ.get("WORLD_SIZE", "1")), int(os.environ.get("RANK", "0"))
    transformers.set_seed(0)
    model = GPT2LMHeadModel(GPT2Config(vocab_size=64, n_positions=16, n_embd=a.n_embd, n_layer=2,
                                       n_head=2, resid_pdrop=0.1, embd_pdrop=0.1,
                                       attn_pdrop=0.1))
    if world > 1:
        # gloo in torch 1.13 cannot broadcast bool tensors, and DDP broadcasts every buffer
        # when it wraps the model; GPT-2's causal masks are constant bool buffers: left out.
        torch.nn.parallel.DistributedDataParallel._set_params_and_buffers_to_ignore_for_model(
            model, [n for n, b in model.named_buffers() if b.dtype == torch.bool])
    args = TrainingArguments(
        output_dir=os.path.join(a.out, "hf"), per_device_train_batch_size=4,
        gradient_accumulation_steps=2, max_steps=a.max_steps, save_strategy="steps",
        save_steps=a.save_steps, logging_steps=1, dataloader_num_workers=2, seed=0,
        learning_rate=1e-3, warmup_steps=2, report_to=[], use_cpu=True, disable_tqdm=True,
        log_level="error", ddp_backend="gloo" if world > 1 else None)
    callbacks = []
    ckpt_cb = None
    if a.mode == "ckpt":
        from ckpt.integrations.hf import CkptCallback
        ckpt_cb = CkptCallback(os.path.join(a.out, "run"), keep_last=3,
                               blocking=a.blocking)
        callbacks.append(ckpt_cb)
    if a.kill_at:
        callbacks.append(KillAt(a.kill_at))
    trainer = Recording(model=model, args=args, train_dataset=Tokens(), callbacks=callbacks)
    if world > 1:
        transformers.set_seed(1000 + rank)  # each rank its own RNG streams (module docstring)
    name = "losses.txt" if rank == 0 else f"losses-rank{rank}.txt"
    trainer.losses = open(os.path.join(a.out, name), "a")
    trainer.losses.write(f"# process {os.getpid()}\n")  # a restart starts a new section
    # Timings for bench/integrations_bench.py: each save's stall on the training thread, and
    # the time from train() to the first step (a resume's restore and skipping included).
    stalls = []
    timed = (ckpt_cb, "_save") if ckpt_cb is not None else (trainer, "_save_checkpoint")
    inner = getattr(*timed)

    def timed_save(*args, **kwargs):
        t = time.perf_counter()
        try:
            return inner(*args, **kwargs)
        finally:
            stalls.append(time.perf_counter() - t)

    setattr(*timed, timed_save)
    first_step = FirstStep()
    trainer.add_callback(first_step)
    t0 = time.perf_counter()
    out = trainer.train(resume_from_checkpoint=True if a.resume else None)
    seconds = time.perf_counter() - t0
    trainer.losses.close()
    if trainer.is_world_process_zero():
        with open(os.path.join(a.out, "params.bin"), "wb") as f:
            for k, v in sorted(model.state_dict().items()):
                f.write(v.detach().contiguous().numpy().tobytes())
        result = {"global_step": trainer.state.global_step, "seconds": seconds,
                  "save_stalls": stalls, "to_first_step": first_step.at - t0,
                  "train_loss": out.training_loss,
                  "restored_step": ckpt_cb.restored_step if ckpt_cb else None,
                  "loader_world_size": ckpt_cb.loader.loader.world_size if ckpt_cb else None,
                  "versions": {"transformers": transformers.__version__,
                               "torch": torch.__version__}}
        with open(os.path.join(a.out, "result.json"), "w") as f:
            json.dump(result, f)


if __name__ == "__main__":
    main()
