"""ckpt.integrations.accelerate: Accelerator.save_state / load_state in ckpt's format.

    from ckpt.integrations.accelerate import load_state, save_state
    accelerator.register_for_checkpointing(loader)     # a ckpt.ResumableLoader, for its position
    rep = load_state(accelerator, "runs/x")            # rep.step: 0 on a fresh start
    ...
    save_state(accelerator, "runs/x", step=step)       # on every process, as Accelerate's

The functions take Accelerate's arguments (the accelerator first) and cover what
Accelerator.save_state covers — every prepared model (unwrapped), optimizer and scheduler (the
torch objects inside Accelerate's wrappers), the grad scaler, the objects registered with
register_for_checkpointing and each prepared DataLoader's epoch counter — plus the RNGs of every
process (each process writes its own rank file; rank 0 commits) and the accelerator's
gradient-accumulation counter and save count. Under DDP a model and its optimizer's state are
written once, each tensor by one rank (docs/python.md, "DDP"). The directory is a ckpt run
directory: each save is a new committed step in it (retention keep_last), the newest one is
what load_state restores.

Only the plain (DDP / single-process) paths: FSDP, DeepSpeed and Megatron-LM state is refused
with NotImplementedError. Not thread-safe."""
import json
import os
from typing import Any, Dict, Optional, Set, Tuple

from .. import _core
from ..checkpointer import RestoreReport
from . import require
from ._common import AccumCheckpointer

_accelerate = require("accelerate", "ckpt.integrations.accelerate")

_PLAIN = ("NO", "MULTI_CPU", "MULTI_GPU", "MULTI_NPU", "MULTI_MLU", "MULTI_XPU")

# One Checkpointer per (accelerator, run directory), kept open so that a non-blocking save can
# finish in the background and the next save waits for it.
_open: Dict[Tuple[int, str], AccumCheckpointer] = {}


class _AcceleratorCounters:
    """The accelerator's own counters a resume needs: its gradient-accumulation step (which
    micro-batch syncs) and its save count (project_configuration.iteration)."""

    def __init__(self, accelerator: Any) -> None:
        self.accelerator = accelerator

    def state_dict(self) -> Dict[str, Any]:
        a = self.accelerator
        return {"step": int(a.step), "iteration": int(a.project_configuration.iteration)}

    def load_state_dict(self, state: Dict[str, Any]) -> None:
        a = self.accelerator
        a.step = int(state["step"])
        a.project_configuration.iteration = int(state["iteration"])


class _LoaderEpoch:
    """A prepared DataLoader's epoch counter (DataLoaderShard.iteration: the epoch it gives a
    seedable sampler), for the order of the epochs after the resume."""

    def __init__(self, loader: Any) -> None:
        self.loader = loader

    def state_dict(self) -> Dict[str, Any]:
        return {"iteration": int(getattr(self.loader, "iteration", 0))}

    def load_state_dict(self, state: Dict[str, Any]) -> None:
        if hasattr(self.loader, "iteration"):
            self.loader.iteration = int(state["iteration"])


def _inner(obj: Any, attr: str) -> Any:
    inner = getattr(obj, attr, None)
    return inner if inner is not None and hasattr(inner, "state_dict") else obj


def _replicated(accelerator: Any) -> Set[str]:
    """The names of the prepared models that every process holds alike, so that each of their
    tensors is written once (Checkpointer(replicated=...)), and with them the state of an
    optimizer over them: under plain multi-process data parallelism Accelerate wraps each
    prepared model that has a trainable parameter in DistributedDataParallel, which broadcasts
    rank 0's parameters and keeps them equal. `accelerator._models` keeps the model as passed
    (Accelerate 0.30 records the DDP wrapper only for FSDP), so the rule is Accelerate's own,
    not an isinstance test. A model prepared with evaluation_mode=True is not wrapped; it is
    taken as alike too (nothing trains it)."""
    import torch
    kind = str(getattr(accelerator.distributed_type, "name", accelerator.distributed_type))
    if kind == "NO" or int(accelerator.num_processes) <= 1:
        return set()
    ddp = torch.nn.parallel.DistributedDataParallel
    return {_name("model", i) for i, m in enumerate(accelerator._models)
            if isinstance(m, ddp) or any(p.requires_grad for p in m.parameters())}


def _scheduler_steps(accelerator: Any) -> int:
    """How many times a prepared scheduler steps per optimizer step: AcceleratedScheduler steps
    the scheduler once per process unless split_batches (or step_with_optimizer=False, where the
    caller steps it). 1 when the prepared schedulers do not all agree."""
    counts = {1 if getattr(s, "split_batches", True) or not getattr(s, "step_with_optimizer",
                                                                    True)
              else int(accelerator.num_processes) for s in accelerator._schedulers}
    return counts.pop() if len(counts) == 1 else 1


def _objects(accelerator: Any) -> Dict[str, Any]:
    kind = str(getattr(accelerator.distributed_type, "name", accelerator.distributed_type))
    if kind not in _PLAIN:
        raise NotImplementedError(f"ckpt.integrations.accelerate: distributed_type {kind} is "
                                  "not supported (its sharded state needs ckpt's sharded "
                                  "format); use Accelerator.save_state")
    objects: Dict[str, Any] = {}
    for i, model in enumerate(accelerator._models):
        objects[_name("model", i)] = accelerator.unwrap_model(model)
    for i, opt in enumerate(accelerator._optimizers):
        objects[_name("optimizer", i)] = _inner(opt, "optimizer")
    for i, sched in enumerate(accelerator._schedulers):
        objects[_name("scheduler", i)] = _inner(sched, "scheduler")
    for i, loader in enumerate(accelerator._dataloaders):
        objects[f"dataloader_{i}"] = _LoaderEpoch(loader)
    for i, obj in enumerate(accelerator._custom_objects):
        objects[_custom_name(obj, i)] = obj
    if accelerator.scaler is not None:
        objects["grad_scaler"] = accelerator.scaler
    objects["accelerator"] = _AcceleratorCounters(accelerator)
    return objects


def _name(kind: str, i: int) -> str:
    return kind if i == 0 else f"{kind}_{i}"


def _custom_name(obj: Any, i: int) -> str:
    from ..loader import ResumableLoader
    if isinstance(obj, ResumableLoader) and i == 0:
        return "loader"  # ckpt's loader component: `ckpt audit` and `ckpt coverage` read it
    return f"custom_{i}"


def _run_dir(accelerator: Any, directory: Optional[str], call: str) -> str:
    """The run directory, a local path or s3://bucket/prefix (any other URL raises)."""
    if directory is not None:
        return _core.location(os.fspath(directory))
    project = accelerator.project_dir
    if project is None:
        raise ValueError(f"{call}: no directory given and the accelerator has no project_dir")
    return _core.location(os.path.join(project, "checkpoints"))


def _checkpointer(accelerator: Any, run_dir: str, keep_last: int) -> AccumCheckpointer:
    key = (id(accelerator), run_dir if "://" in run_dir else os.path.realpath(run_dir))
    ck = _open.get(key)
    if ck is None or ck.keep_last != keep_last:
        if ck is not None:
            ck.close()
        ck = AccumCheckpointer(run_dir, keep_last=keep_last)
        steps = int(accelerator.gradient_accumulation_steps)
        ck.grad_accum_steps = steps
        ck.config = json.dumps({"integration": "accelerate",
                                "gradient_accumulation_steps": steps}, sort_keys=True)
        _open[key] = ck
    ck._objects.clear()  # what is prepared now
    ck.track(**_objects(accelerator))
    ck.replicated = _replicated(accelerator)
    ck.scheduler_steps_per_step = _scheduler_steps(accelerator)
    return ck


def save_state(accelerator: Any, output_dir: Optional[str] = None,
               safe_serialization: bool = True, *, step: Optional[int] = None,
               blocking: bool = True, keep_last: int = 3,
               **save_model_func_kwargs: Any) -> str:
    """Accelerator.save_state(output_dir, safe_serialization) in ckpt's format; call it on every
    process. output_dir is a ckpt run directory (default: project_dir/checkpoints); step names
    the checkpoint (default: the accelerator's save count, which this call advances, as
    Accelerate's does). blocking=False returns after the snapshot (ckpt.Checkpointer.save).
    safe_serialization is accepted for Accelerate's signature: ckpt never pickles. Returns the
    checkpoint's directory."""
    if save_model_func_kwargs:
        raise TypeError(f"save_state: unsupported arguments {sorted(save_model_func_kwargs)} "
                        "(they are for DeepSpeed's save_checkpoint)")
    del safe_serialization
    run_dir = _run_dir(accelerator, output_dir, "save_state")
    if step is None:
        step = int(accelerator.project_configuration.iteration)
    accelerator.project_configuration.iteration += 1  # saved with the state: the next save's
    ck = _checkpointer(accelerator, run_dir, int(keep_last))
    out = ck.save(int(step), blocking=blocking)
    return str(out["dir"])


def load_state(accelerator: Any, input_dir: Optional[str] = None,
               **load_model_func_kwargs: Any) -> RestoreReport:
    """Accelerator.load_state(input_dir) from ckpt's format: restores every prepared object,
    the registered ones, the RNGs of this process and the accelerator's counters from the newest
    committed checkpoint of input_dir (default project_dir/checkpoints). Returns ckpt's
    RestoreReport (rep.step; rep.restored is False on a fresh start, when nothing was
    changed)."""
    if load_model_func_kwargs:
        raise TypeError(f"load_state: unsupported arguments {sorted(load_model_func_kwargs)}")
    run_dir = _run_dir(accelerator, input_dir, "load_state")
    ck = _checkpointer(accelerator, run_dir, 3)
    rep: RestoreReport = ck.restore_latest()
    return rep


def close(accelerator: Any) -> None:
    """Waits for this accelerator's saves in flight (raising the first failure) and releases
    its run directories."""
    error: Optional[BaseException] = None
    for key in [k for k in _open if k[0] == id(accelerator)]:
        try:
            _open.pop(key).close()
        except Exception as e:  # noqa: BLE001 - every run is closed, the first error raised
            error = error or e
    if error is not None:
        raise error


__all__ = ["save_state", "load_state", "close"]
