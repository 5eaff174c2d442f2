"""ckpt.integrations.hf: ckpt's checkpoints for Hugging Face transformers.Trainer.

    trainer = Trainer(model=model, args=args, train_dataset=ds,
                      callbacks=[CkptCallback("runs/x", keep_last=3)])
    trainer.train()            # resumes from runs/x by itself (or resume_from_checkpoint=True)

The callback takes over three things of the Trainer it is given to (in Trainer.__init__, by
on_init_end, which finds the Trainer on the call stack):

1. The training DataLoader: get_train_dataloader returns a ckpt.ResumableLoader over the same
   dataset, collator, batch size and workers, so the checkpoint holds the exact position the
   training loop consumed and a resume continues at the next batch in O(1) (the Trainer's own
   resume reads the epoch's consumed batches again to skip them).
2. Saving: the Trainer's _save_checkpoint is replaced by ckpt's save, so it saves where and
   when the Trainer would (save_strategy, save_steps; after the step's logging, so the loss
   totals include the step) and writes no checkpoint-N folder of its own. A checkpoint holds
   the model, the optimizer, the LR scheduler, the grad scaler (fp16), the RNGs of every
   process (each rank's file), the TrainerState and the loss and FLOP totals the Trainer keeps
   outside it, and the loader's cursor. Saves happen only on optimizer steps, so the
   gradient-accumulation position is always 0.
3. Resuming: trainer.train() (or resume_from_checkpoint=True) restores the newest committed
   checkpoint of run_dir in on_train_begin, before the first batch; resume_from_checkpoint="path"
   is the Trainer's own resume from that folder, left alone.

Not thread-safe; one CkptCallback per Trainer. Distributed (torchrun, DDP): every rank writes
its own file (its RNGs among them) and reads its own share of the epoch; rank 0 commits after
a barrier (ckpt.Checkpointer), a non-blocking save at the next save or at the end of train().
Sharded state (FSDP, DeepSpeed) is not supported yet (docs/python.md)."""
import dataclasses
import json
import os
import sys
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple

import torch

from ..checkpointer import Checkpointer
from ._common import AccumCheckpointer
from ..loader import ResumableLoader
from . import require

transformers = require("transformers", "ckpt.integrations.hf")

# The TrainerState fields a resume puts back; the rest (max_steps, logging/save steps, batch
# size, process flags) are the Trainer's to compute from its arguments.
_STATE_FIELDS = ("global_step", "epoch", "log_history", "total_flos", "best_metric",
                 "best_model_checkpoint", "num_input_tokens_seen")


class _TrainerLoader:
    """What the Trainer iterates in place of its DataLoader: a ResumableLoader, whose len() is
    the whole epoch's batch count (the Trainer derives max_steps and its accumulation boundaries
    from it), and which records the span of loader positions each optimizer step consumed."""

    def __init__(self, loader: ResumableLoader, batch_size: int) -> None:
        self.loader = loader
        self.batch_size = batch_size
        self.dataset = loader.dataset
        self._start: Optional[Tuple[int, int]] = None
        self._samples = 0

    def __len__(self) -> int:
        return int(self.loader._sampler.steps_per_epoch())

    def __iter__(self) -> Iterator[Any]:
        for batch in self.loader:
            last = self.loader.last_batch()
            if last is not None:
                if self._start is None:
                    self._start = (int(last[0]), int(last[1]))
                self._samples += int(last[2])
            yield batch

    def take_step_span(self) -> Optional[Tuple[int, int, int]]:
        """(epoch, position, global samples) of the batches since the last call: one optimizer
        step's, for the journal's progress event (what `ckpt coverage` reads)."""
        if self._start is None:
            return None
        span = (self._start[0], self._start[1], self._samples)
        self._start, self._samples = None, 0
        return span


class _TrainerCounters:
    """The TrainerState (as JSON, stored as bytes: log_history grows without bound) and the loss
    and FLOP totals the Trainer keeps on itself, as one tracked component."""

    def __init__(self, trainer: Any) -> None:
        self.trainer = trainer

    def state_dict(self) -> Dict[str, Any]:
        t = self.trainer
        return {"trainer_state": json.dumps(dataclasses.asdict(t.state), sort_keys=True).encode(),
                "total_loss_scalar": float(getattr(t, "_total_loss_scalar", 0.0)),
                "current_flos": float(getattr(t, "current_flos", 0.0))}

    def load_state_dict(self, state: Dict[str, Any]) -> None:
        t = self.trainer
        saved = json.loads(bytes(state["trainer_state"]).decode())
        for field in _STATE_FIELDS:
            if field in saved and hasattr(t.state, field):
                setattr(t.state, field, saved[field])
        t._total_loss_scalar = float(state["total_loss_scalar"])
        t.current_flos = float(state["current_flos"])
        # The loss logged next averages over the steps since the restored step, not since 0.
        t._globalstep_last_logged = t.state.global_step


def _find_trainer() -> Any:
    """The transformers.Trainer whose __init__ (or train) is on the call stack."""
    frame = sys._getframe(1)
    while frame is not None:
        obj = frame.f_locals.get("self")
        if isinstance(obj, transformers.Trainer):
            return obj
        frame = frame.f_back  # type: ignore[assignment]
    return None


def _unwrap(obj: Any) -> Any:
    """Accelerate's AcceleratedOptimizer / AcceleratedScheduler hold the torch object; ckpt
    tracks that one (restored in place, checked against the live parameter groups)."""
    for attr in ("optimizer", "scheduler"):
        inner = getattr(obj, attr, None)
        if inner is not None and hasattr(inner, "state_dict") and type(obj).__module__.startswith(
                "accelerate"):
            return inner
    return obj


class CkptCallback:
    """A transformers.Trainer callback that checkpoints with ckpt (module docstring).

    run_dir: ckpt's run directory (not args.output_dir's checkpoint-N folders).
    keep_last: committed checkpoints kept (ckpt.Checkpointer's retention).
    blocking: False returns from a save after the snapshot; the write and commit run in the
    background (ckpt.Checkpointer.save(blocking=False)).
    resume: restore the newest checkpoint of run_dir when training starts (default True)."""

    def __init__(self, run_dir: "str | os.PathLike[str]", keep_last: int = 3,
                 blocking: bool = False, resume: bool = True) -> None:
        self.run_dir = os.fspath(run_dir)
        self.keep_last = int(keep_last)
        self.blocking = bool(blocking)
        self.resume = bool(resume)
        self.trainer: Any = None
        self.checkpointer: Optional[Checkpointer] = None
        self.loader: Optional[_TrainerLoader] = None
        self.restored_step: Optional[int] = None
        self._explicit_resume = False
        self._resume_now = self.resume
        self._span: Optional[Tuple[int, int, int]] = None
        self._saved_step = -1

    # --- attaching ----------------------------------------------------------------------------
    def attach(self, trainer: Any) -> None:
        """Takes over the Trainer's training DataLoader and its train() (module docstring). Done
        by on_init_end for a callback given to Trainer(callbacks=[...]); call it yourself for
        one added later with trainer.add_callback."""
        if self.trainer is trainer:
            return
        self.trainer = trainer
        trainer.get_train_dataloader = self._train_dataloader
        train: Callable[..., Any] = trainer.train

        def train_with_ckpt(resume_from_checkpoint: "str | bool | None" = None,
                            *args: Any, **kwargs: Any) -> Any:
            self._explicit_resume = resume_from_checkpoint is True
            own = isinstance(resume_from_checkpoint, (str, os.PathLike))
            self._resume_now = self.resume and not own  # a path: the Trainer's own resume
            if resume_from_checkpoint is True:
                resume_from_checkpoint = None  # ckpt resumes; the Trainer would look for its own
            return train(resume_from_checkpoint, *args, **kwargs)

        trainer.train = train_with_ckpt

        def save_instead(model: Any, trial: Any, metrics: Any = None) -> None:
            self._save(trainer.state)  # where the Trainer saves: after the step's logging

        trainer._save_checkpoint = save_instead

    def _train_dataloader(self) -> _TrainerLoader:
        t = self.trainer
        if t.train_dataset is None:
            raise ValueError("Trainer: training requires a train_dataset.")
        dataset = t.train_dataset
        if isinstance(dataset, torch.utils.data.IterableDataset) or not hasattr(dataset,
                                                                                "__len__"):
            raise TypeError("ckpt.integrations.hf.CkptCallback: the train_dataset is an "
                            "iterable dataset; ckpt's resumable loader needs a map-style "
                            "dataset (__len__ and __getitem__)")
        collator = t.data_collator
        datasets = sys.modules.get("datasets")
        if datasets is not None and isinstance(dataset, datasets.Dataset):
            dataset = t._remove_unused_columns(dataset, description="training")
        else:
            collator = t._get_collator_with_removed_columns(collator, description="training")
        args = t.args
        seed = args.data_seed if args.data_seed is not None else args.seed
        loader = ResumableLoader(dataset, batch_size=t._train_batch_size, seed=int(seed),
                                 shuffle=True, drop_last=bool(args.dataloader_drop_last),
                                 num_workers=int(args.dataloader_num_workers),
                                 collate_fn=collator, pin_memory=bool(args.dataloader_pin_memory))
        self.loader = _TrainerLoader(loader, t._train_batch_size)
        return self.loader

    # --- the Trainer's events -----------------------------------------------------------------
    def on_init_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> Any:
        trainer = _find_trainer()
        if trainer is None:
            raise RuntimeError("ckpt.integrations.hf.CkptCallback: no transformers.Trainer on "
                               "the call stack of on_init_end; call callback.attach(trainer)")
        self.attach(trainer)
        return control

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> Any:
        t = self.trainer
        if t is None or self.loader is None:
            raise RuntimeError("ckpt.integrations.hf.CkptCallback: not attached to the Trainer "
                               "before train(): pass it in Trainer(callbacks=[...]) or call "
                               "callback.attach(trainer) before train()")
        ck = AccumCheckpointer(self.run_dir, keep_last=self.keep_last)
        ck.grad_accum_steps = int(t.args.gradient_accumulation_steps)
        ck.config = json.dumps({"integration": "transformers", "args": t.args.to_dict()},
                               sort_keys=True, default=str)
        objects: Dict[str, Any] = {"model": t.model, "optimizer": _unwrap(t.optimizer),
                                   "scheduler": _unwrap(t.lr_scheduler),
                                   "loader": self.loader.loader, "trainer": _TrainerCounters(t)}
        scaler = getattr(t.accelerator, "scaler", None)
        if scaler is not None:
            objects["grad_scaler"] = scaler
        ck.track(**objects)
        if isinstance(getattr(t, "model_wrapped", None),
                      torch.nn.parallel.DistributedDataParallel):
            ck.replicated = {"model"}  # one rank writes each parameter and moment
        self.checkpointer = ck
        self.restored_step = None
        if self._resume_now:
            rep = ck.restore_latest()
            if rep.restored:
                self.restored_step = int(rep.step)
                self._saved_step = int(rep.step)
            elif self._explicit_resume:
                raise ValueError(f"resume_from_checkpoint=True: no committed ckpt checkpoint in "
                                 f"{self.run_dir}")
        return control

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> Any:
        assert self.loader is not None
        self._span = self.loader.take_step_span()
        epoch, position = self.loader.loader.cursor()
        # Epochs as the loader counts them: the Trainer's own count restarts at 0 on a resume.
        state.epoch = int(epoch) + int(position) / max(1, len(self.loader.dataset))
        return control

    def on_log(self, args: Any, state: Any, control: Any, logs: Optional[Dict[str, Any]] = None,
               **kwargs: Any) -> Any:
        ck = self.checkpointer
        if ck is None or not logs or "loss" not in logs:
            return control
        more: Dict[str, Any] = {}
        if self._span is not None:
            more["epoch"], more["position"], more["samples"] = self._span
        ck.log_progress(int(state.global_step), lr=logs.get("learning_rate"),
                        loss=logs.get("loss"), **more)
        return control

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> Any:
        if self.checkpointer is not None:
            self.checkpointer.close()  # waits for the save in flight (and raises its failure)
            self.checkpointer = None
        return control

    def _save(self, state: Any) -> None:
        assert self.checkpointer is not None
        step = int(state.global_step)
        if step == self._saved_step:
            return  # the epoch end after a step that saved, or the step a resume started from
        self.checkpointer.save(step, blocking=self.blocking)
        self._saved_step = step

    def __getattr__(self, name: str) -> Callable[..., Any]:
        # The Trainer calls every event on every callback; those not handled above do nothing.
        if name.startswith("on_"):
            return _pass_control
        raise AttributeError(name)


def _pass_control(args: Any, state: Any, control: Any, **kwargs: Any) -> Any:
    return control


__all__ = ["CkptCallback"]
