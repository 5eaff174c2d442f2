"""ckpt.integrations.lightning: ckpt's checkpoints for Lightning's Trainer.

    trainer = lightning.pytorch.Trainer(plugins=[CkptIO()], callbacks=[ModelCheckpoint(...)])
    trainer.fit(model, train_dataloaders=ResumableLoader(ds, batch_size=32, num_workers=2),
                ckpt_path="last")

CkptIO is a CheckpointIO plugin: every checkpoint Lightning makes (ModelCheckpoint's top-k and
last, trainer.save_checkpoint, on exception) is written in ckpt's format — the path Lightning
names ("…/last.ckpt") becomes a ckpt run directory holding one committed step, replaced
atomically on each save (commit record, LATEST; a kill at any moment leaves the previous one) —
and read back by load_checkpoint, so trainer.fit(ckpt_path="last" or a path) resumes from it.

Beyond Lightning's own checkpoint dict, ckpt saves the RNGs (torch CPU and CUDA, Python's
random, numpy) and restores them when Lightning loads the checkpoint; with the train loader a
ResumableLoader (this module's: its len() is the whole epoch, as Lightning counts batches),
Lightning's loops store its exact position and a resume continues at the next batch, mid-epoch,
without replaying the epoch's head.

Saves are non-blocking by default (AsyncCheckpointIO semantics): save_checkpoint returns after
ckpt's snapshot of the tensors; the write and commit run on a background thread; the next save
to the same path, remove_checkpoint of it and teardown wait for it and raise its failure.

Under DDP Lightning calls save_checkpoint on global rank 0 only, with the dict rank 0 made; every
rank makes that dict (trainer.save_checkpoint runs on all of them), and this module's
ResumableLoader, whose state is in it, takes the rank and world size of the process group once
Lightning has started it and, in its state_dict(), gathers every rank's RNGs into the state
(a collective: Lightning's own save_checkpoint needs every rank too). load_checkpoint, which
Lightning calls on every rank, gives each rank its own RNGs back. Not thread-safe."""
import os
import shutil
from typing import Any, Dict, Iterator, List, Literal, Optional, Sized, Tuple

import torch

from .. import _core, _rng
from ..checkpointer import Checkpointer
from ..loader import ResumableLoader as _BaseLoader
from . import require
from ._common import AccumCheckpointer, single_process

_io = require("lightning.pytorch.plugins.io", "ckpt.integrations.lightning")

# The checkpoint dict's keys stored as their own components (what `ckpt audit` recognises);
# everything else (loops, callbacks, epoch, global_step, hyperparameters, ...) is "lightning".
_MODEL, _OPTIMIZERS, _SCHEDULERS = "state_dict", "optimizer_states", "lr_schedulers"


# The key of a ResumableLoader state that holds every rank's RNGs (a list, by rank), under DDP.
_RANK_RNGS = "ckpt.rank_rngs"


def _process_group() -> Optional[Any]:
    d = torch.distributed
    return d if d.is_available() and d.is_initialized() else None


class ResumableLoader(_BaseLoader):
    """ckpt.ResumableLoader for Lightning's Trainer:

    - len() is the epoch's whole batch count (the base class gives the batches left): Lightning
      computes the epoch's length after restoring the loader's state and counts the batches
      already trained itself;
    - without world_size= and rank=, the rank and world size are the process group's once
      torch.distributed is initialised: under strategy="ddp" Lightning starts it in
      Trainer.fit, after the loader was made (the base class reads them when it is made);
    - under DDP, state_dict() gathers every rank's RNGs into the state (module docstring), so
      it must be called on every rank, as Lightning's checkpoint dump does."""

    def __init__(self, dataset: Sized, batch_size: int, seed: int = 0, shuffle: bool = True,
                 drop_last: bool = False, num_workers: int = 0, world_size: Optional[int] = None,
                 rank: Optional[int] = None, **dataloader_kwargs: Any) -> None:
        super().__init__(dataset, batch_size, seed, shuffle, drop_last, num_workers, world_size,
                         rank, **dataloader_kwargs)
        self._follow_group = world_size is None and rank is None

    def _bind(self) -> None:
        group = _process_group()
        if not self._follow_group or group is None:
            return
        world, rank = group.get_world_size(), group.get_rank()
        if (world, rank) == (self.world_size, self.rank):
            return
        state = self._sampler.state()  # the global cursor, resharded to the new world size
        self.world_size, self.rank = world, rank
        self._sampler = _core.Sampler(self._n, self.seed, self.shuffle, self.drop_last, world,
                                      rank, self.batch_size)
        self._sampler.load_state(state)

    def __iter__(self) -> Iterator[Any]:
        self._bind()
        yield from super().__iter__()

    def __len__(self) -> int:
        self._bind()
        return int(self._sampler.steps_per_epoch())

    def cursor(self) -> Tuple[int, int]:
        self._bind()
        return super().cursor()

    def state_dict(self) -> Dict[str, Any]:
        self._bind()
        state = super().state_dict()
        group = _process_group()
        if group is not None and group.get_world_size() > 1:
            rngs: List[Any] = [None] * group.get_world_size()
            group.all_gather_object(rngs, _rng.capture())
            state[_RANK_RNGS] = rngs
        return state

    def load_state_dict(self, state: Dict[str, Any]) -> None:
        self._bind()
        super().load_state_dict({k: v for k, v in state.items() if k != _RANK_RNGS})


class _Part:
    """One component of a Lightning checkpoint dict, as the Checkpointer tracks it."""

    def __init__(self, state: Any = None) -> None:
        self.state = state

    def state_dict(self) -> Any:
        return self.state if self.state is not None else {}

    def load_state_dict(self, state: Any) -> None:
        self.state = state


def _indexed(name: str, i: int) -> str:
    return name if i == 0 else f"{name}_{i}"


def _split(checkpoint: Dict[str, Any]) -> Dict[str, _Part]:
    parts: Dict[str, _Part] = {}
    rest = dict(checkpoint)
    if _MODEL in rest:
        parts["model"] = _Part(rest.pop(_MODEL))
    for key, name in ((_OPTIMIZERS, "optimizer"), (_SCHEDULERS, "scheduler")):
        states = rest.pop(key, None)
        if states is not None:
            rest[f"ckpt.{key}"] = len(states)
            for i, s in enumerate(states):
                parts[_indexed(name, i)] = _Part(s)
    parts["lightning"] = _Part(rest)
    loaders = _loader_states(checkpoint)
    if len(loaders) == 1:  # also as ckpt's own loader component, which `ckpt audit` reads
        parts["loader"] = _Part({k: v for k, v in loaders[0].items() if k != _RANK_RNGS})
    return parts


def _restore_rank_rngs(checkpoint: Dict[str, Any]) -> None:
    """This rank's RNGs from a checkpoint made under DDP at this world size; otherwise (one
    process, another world size) the rng component's, rank 0's, stay."""
    group = _process_group()
    if group is None:
        return
    for st in _loader_states(checkpoint):
        rngs = st.get(_RANK_RNGS)
        if isinstance(rngs, list) and len(rngs) == group.get_world_size():
            _rng.restore(rngs[group.get_rank()])
            return


def _loader_states(checkpoint: Dict[str, Any]) -> List[Dict[str, Any]]:
    try:
        states = checkpoint["loops"]["fit_loop"]["state_dict"]["combined_loader"]
    except (KeyError, TypeError):
        return []
    return [st for st in states if _is_ckpt_loader(st)]


def _is_ckpt_loader(st: Any) -> bool:
    return isinstance(st, dict) and {"order", "position", "batch_size", "world_size",
                                     "dataset_size"} <= set(st)


def _batches_per_step(checkpoint: Dict[str, Any]) -> int:
    """Batches per optimizer step, from Lightning's own counts (its accumulate_grad_batches
    is not in the checkpoint): the batches trained over the global step, 1 when unknown."""
    try:
        ready = int(checkpoint["loops"]["fit_loop"]["epoch_loop.batch_progress"]["total"]
                    ["ready"])
        step = int(checkpoint["global_step"])
    except (KeyError, TypeError, ValueError):
        return 1
    return ready // step if step > 0 and ready % step == 0 else 1


def _join(parts: Dict[str, _Part]) -> Dict[str, Any]:
    checkpoint = dict(parts["lightning"].state_dict())
    if "model" in parts:
        checkpoint[_MODEL] = parts["model"].state_dict()
    for key, name in ((_OPTIMIZERS, "optimizer"), (_SCHEDULERS, "scheduler")):
        count = checkpoint.pop(f"ckpt.{key}", None)
        if count is not None:
            checkpoint[key] = [parts[_indexed(name, i)].state_dict() for i in range(int(count))]
    return checkpoint


_CheckpointIO: Any = _io.CheckpointIO


class CkptIO(_CheckpointIO):  # type: ignore[misc]
    """A Lightning CheckpointIO that writes and reads ckpt's format (module docstring).

    blocking: False (default) returns from save_checkpoint after the snapshot.
    on_damaged: ckpt.Checkpointer's, for load_checkpoint."""

    def __init__(self, blocking: bool = False,
                 on_damaged: Literal["refuse", "fallback"] = "refuse") -> None:
        super().__init__()
        self.blocking = bool(blocking)
        self.on_damaged = on_damaged
        self._writers: Dict[str, AccumCheckpointer] = {}

    def save_checkpoint(self, checkpoint: Dict[str, Any], path: Any,
                        storage_options: Optional[Any] = None) -> None:
        if storage_options is not None:
            raise TypeError(f"CkptIO.save_checkpoint: storage_options is not supported (got "
                            f"{storage_options!r})")
        run_dir = _core.location(os.fspath(path))  # s3://bucket/prefix too; no other URL
        ck = self._writers.get(run_dir)
        if ck is None:
            ck = AccumCheckpointer(run_dir, keep_last=1)
            single_process(ck)
            self._writers[run_dir] = ck
        checkpoint = _consumed_positions(checkpoint)
        ck.grad_accum_steps = _batches_per_step(checkpoint)
        ck._objects.clear()  # the components of this dict (their count may change)
        ck.track(**_split(checkpoint))
        ck.save(int(checkpoint.get("global_step", 0)), blocking=self.blocking)

    def load_checkpoint(self, path: Any, map_location: Optional[Any] = None) -> Dict[str, Any]:
        run_dir = _core.location(os.fspath(path))
        self._settle(run_dir)
        if not _core.is_dir(run_dir):
            raise FileNotFoundError(f"CkptIO.load_checkpoint: {run_dir} is not a ckpt run "
                                    "directory (is it a checkpoint of another CheckpointIO?)")
        latest = _core.find_latest(run_dir)
        if not latest:
            raise FileNotFoundError(f"CkptIO.load_checkpoint: {run_dir} holds no committed ckpt "
                                    "checkpoint")
        names: List[str] = [n for n in latest["components"]
                            if n not in ("rng", "train", "loader")]
        parts = {n: _Part() for n in names if n != "loader"}  # Lightning's loops hold the loader
        ck = Checkpointer(run_dir, read_only=True, on_damaged=self.on_damaged)
        ck.track(**parts)
        ck.restore_latest()  # verifies every tensor, then sets the RNGs and fills the parts
        checkpoint = _join(parts)
        _restore_rank_rngs(checkpoint)
        if map_location is not None:
            checkpoint = _move(checkpoint, map_location)
        return checkpoint

    def remove_checkpoint(self, path: Any) -> None:
        run_dir = _core.location(os.fspath(path))
        self._settle(run_dir)
        if "://" in run_dir:  # a run directory on a store: every object under it
            _core.remove_tree(run_dir)
        elif os.path.isdir(run_dir):
            shutil.rmtree(run_dir)
        elif os.path.exists(run_dir):
            os.remove(run_dir)

    def teardown(self) -> None:
        """Waits for every save in flight (raising the first failure) and releases the runs."""
        errors: List[BaseException] = []
        for run_dir in list(self._writers):
            try:
                self._settle(run_dir)
            except Exception as e:  # noqa: BLE001 - every run is closed, the first error raised
                errors.append(e)
        if errors:
            raise errors[0]

    def _settle(self, run_dir: str) -> None:
        ck = self._writers.pop(run_dir, None)
        if ck is not None:
            ck.close()  # waits for its save in flight (and raises its failure)


def _consumed_positions(checkpoint: Dict[str, Any]) -> Dict[str, Any]:
    """The checkpoint with the fit loop's batch counts and each ResumableLoader state in it at
    the batch the loop has trained, not the one Lightning's data fetcher has already fetched:
    the fetcher runs one batch ahead (to know the last batch), so the loader's own cursor is
    one batch further than the training. The epoch's trained batches are Lightning's own count
    (the epoch loop's batch_progress.current.ready), restored with it; a resume then starts at
    the next batch."""
    try:
        fit = checkpoint["loops"]["fit_loop"]
        states = fit["state_dict"]["combined_loader"]
        ready = int(fit["epoch_loop.batch_progress"]["current"]["ready"])
    except (KeyError, TypeError):
        return checkpoint
    fixed = []
    for st in states:
        if _is_ckpt_loader(st):
            want = min(ready * int(st["batch_size"]) * int(st["world_size"]),
                       int(st["dataset_size"]))
            st = dict(st, position=want,
                      samples_seen=int(st.get("samples_seen", 0)) - (int(st["position"]) - want))
        fixed.append(st)
    out = dict(checkpoint)
    out["loops"] = dict(checkpoint["loops"])
    out["loops"]["fit_loop"] = dict(fit)
    out["loops"]["fit_loop"]["state_dict"] = dict(fit["state_dict"], combined_loader=fixed)
    # A save from on_train_batch_end (ModelCheckpoint's every_n_train_steps) comes after the
    # batch was trained (processed) but before Lightning counts it completed; a restart resets
    # "ready" to "completed", so the resumed loop would count that batch again and take its
    # optimizer steps one batch off the accumulation boundary. The batch is done: say so.
    progress = {}
    for part in ("current", "total"):
        p = dict(fit["epoch_loop.batch_progress"][part])
        if p.get("processed") == p.get("ready"):
            p["completed"] = p["ready"]
        progress[part] = p
    out["loops"]["fit_loop"]["epoch_loop.batch_progress"] = dict(
        fit["epoch_loop.batch_progress"], **progress)
    return out


def _move(value: Any, map_location: Any) -> Any:
    """torch.load's map_location for a device, a device name or a callable: applied to every
    tensor of the loaded checkpoint (they are read into host memory)."""
    import torch
    if isinstance(value, torch.Tensor):
        if callable(map_location):
            return map_location(value, "cpu")
        if isinstance(map_location, dict):
            return value.to(map_location.get("cpu", "cpu"))
        return value.to(map_location)
    if isinstance(value, dict):
        return type(value)((k, _move(v, map_location)) for k, v in value.items())
    if isinstance(value, list):
        return [_move(v, map_location) for v in value]
    if isinstance(value, tuple):
        return tuple(_move(v, map_location) for v in value)
    return value


__all__ = ["CkptIO", "ResumableLoader"]
