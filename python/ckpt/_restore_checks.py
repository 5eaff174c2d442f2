"""The checks restore_latest() makes before it reads a tensor byte (docs/python.md, "The API"
and "Damaged and newer checkpoints"): which checkpoint it may restore at all — a damaged or
newer-format checkpoint is never stepped over silently (``on_damaged``, as the C++
Checkpointer's OnDamaged) — and what a tracked object's load_state_dict would refuse: a module's
keys, a loader's dataset and cursor."""
from __future__ import annotations

import os
from typing import Any, Dict, List, Optional, Sequence, Tuple

import torch

from . import _core, _shard, _tree
from .errors import CorruptCheckpointError, InvalidArgumentError, MismatchError
from .loader import ResumableLoader

ON_DAMAGED = ("refuse", "fallback")


def check_on_damaged(value: str) -> str:
    if value not in ON_DAMAGED:
        raise InvalidArgumentError(f"on_damaged: {value!r} is not one of {', '.join(ON_DAMAGED)}")
    return value


def _refusal(where: str, problem: str, older: Optional[int]) -> str:
    instead = (f"restore the older {_core.step_dir_name(older)}" if older is not None
               else "start from scratch")
    return (f"{where}: {problem}; refusing to {instead} instead "
            "(on_damaged=\"fallback\" allows it)")


def open_latest(run_dir: str, rank: int, on_damaged: str) -> Tuple[
        Optional[Dict[str, Any]], Optional[_core.OpenRank], List[str]]:
    """(checkpoint, opened, stepped_over): the newest committed checkpoint that this build can
    read ({"step", "dir", "note", "world_size", "components"}, as _core.find_latest), this rank's
    file in it (_core.OpenRank), and one line per damaged or newer-format checkpoint stepped over
    ("step-N: why"). (None, None, stepped_over) is a fresh start. With on_damaged="refuse" a
    checkpoint that would be stepped over raises CorruptCheckpointError naming it instead: a
    damaged commit record newer than every intact checkpoint (what C++'s check_damaged refuses),
    or a rank file whose format or format_version is not this build's."""
    # The commit records, newest first, up to the first committed one (on a store: one LIST, a
    # GET or two, LATEST); all of them only where nothing is committed (the damaged ones a fresh
    # start steps over).
    latest, damaged = _core.look_up_latest(run_dir)
    if latest is not None:
        damaged = latest["damaged_newer"]
    newest = latest["step"] if latest else None
    stepped: List[str] = []
    for e in damaged:
        if on_damaged == "refuse":
            raise CorruptCheckpointError(
                _refusal(e["dir"], f"damaged checkpoint ({e['problem']})", newest))
        stepped.append(f"{os.path.basename(e['dir'])}: {e['problem']}")
    while latest:
        file_rank = min(rank, latest["world_size"] - 1)
        opened = _core.OpenRank(latest["dir"], file_rank, latest.get("record"))
        problem = _format_problem(opened.tree["attrs"])
        if problem is None:
            return latest, opened, stepped
        older = [e for e in _core.list_checkpoints(run_dir)
                 if e["committed"] and e["step"] < latest["step"]]
        where = os.path.join(latest["dir"], _core.rank_file_name(file_rank))
        if on_damaged == "refuse":
            raise CorruptCheckpointError(
                _refusal(where, problem, older[-1]["step"] if older else None))
        stepped.append(f"{os.path.basename(latest['dir'])}: {where}: {problem}")
        latest = dict(older[-1], note="") if older else None
    return None, None, stepped


def _format_problem(attrs: Dict[str, Any]) -> Optional[str]:
    fmt, version = attrs.get("format"), attrs.get("format_version")
    newest = _shard.max_format_version()  # version 2: boxes of sharded tensors (format.md §8)
    if fmt == _core.FORMAT and isinstance(version, int) and 1 <= version <= newest:
        return None
    versions = f"version {newest}" if newest <= 1 else f"versions 1 to {newest}"
    return f"format {fmt!r} version {version}, this build reads format {_core.FORMAT!r} {versions}"


def check_object(name: str, meta: _tree.Tree, obj: object, live_state: Any) -> None:
    """What load_state_dict would refuse, checked from the stored structure alone: a module's
    keys (check_module_keys) and a ResumableLoader's dataset, order and cursor."""
    if isinstance(obj, torch.nn.Module):
        check_module_keys(name, meta, live_state)
    elif isinstance(obj, ResumableLoader):
        obj._sampler.check_state({k: v for k, v in meta["attrs"].items()
                                  if not k.startswith("ckpt.") and k != "samples_seen"})


def wrapper_renames(meta: _tree.Tree, live_state: Any) -> Optional[Tuple[str, str]]:
    """(saved prefix, live prefix) when a module's stored keys and its live state_dict()'s
    differ only by the wrappers around the module: saved from torch.compile(m) or DDP(m),
    restored into m (or the other way round, or through other wrappers). None when the keys
    match as they are, or differ otherwise (check_module_keys then says how)."""
    saved, live = _tree.stored_keys(meta), list(live_state)
    if set(saved) == set(live):
        return None
    sp, lp = _core.module_wrapper_prefix(saved), _core.module_wrapper_prefix(live)
    if sp == lp or {k[len(sp):] for k in saved} != {k[len(lp):] for k in live}:
        return None
    return sp, lp


def check_module_keys(name: str, meta: _tree.Tree, live_state: Any) -> None:
    """The keys of a module's stored state (in torch's layout) against its live
    state_dict()'s, as a strict load_state_dict compares them, but before anything live is
    written."""
    saved = _tree.stored_keys(meta)
    have, want = set(saved), set(live_state)
    missing = [k for k in live_state if k not in have]
    unexpected = [k for k in saved if k not in want]
    if not missing and not unexpected:
        return
    parts = []
    if missing:
        parts.append(f"the checkpoint lacks {_few(missing)}")
    if unexpected:
        parts.append(f"the live module has no {_few(unexpected)}")
    raise MismatchError(f"component \"{name}\": {'; '.join(parts)} (nothing was restored)")


def _few(keys: Sequence[str], at_most: int = 5) -> str:
    shown = ", ".join(f'"{k}"' for k in keys[:at_most])
    more = len(keys) - at_most
    return shown + (f" and {more} more" if more > 0 else "")
