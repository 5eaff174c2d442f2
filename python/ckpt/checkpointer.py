"""ckpt.Checkpointer: complete, verified, bit-exact checkpoints of PyTorch training state.

Python walks state_dict() trees and hands tensors to ckpt._core; the file format, hashing, the
commit protocol, retention and the journal are the C++ core's (docs/python.md)."""
from __future__ import annotations

import json
import operator
import os
import time
from copy import copy, deepcopy
from dataclasses import dataclass, field
from types import TracebackType
from typing import (TYPE_CHECKING, Any, Callable, Dict, Iterable, List, Literal, Optional,
                    Protocol, Set, Tuple, Type, Union, runtime_checkable)

import torch

from . import _atexit, _core, _cxx, _env, _interrupts, _restore_checks, _rng, _shard, _tree
from .errors import CheckpointError, InvalidArgumentError, MissingRequiredError

if TYPE_CHECKING:
    from .loader import ResumableLoader

_RESERVED = ("rng", "train")
_PRODUCER = f"ckpt-python {_core.VERSION}"


@runtime_checkable
class Stateful(Protocol):
    """What Checkpointer.track takes besides a tensor: an object with state_dict() and
    load_state_dict(state) — a module, an optimizer, an LR scheduler, a GradScaler, a
    ResumableLoader, a ckpt.Value, or any object of yours with the two methods."""

    def state_dict(self) -> Any: ...

    def load_state_dict(self, state_dict: Any, /) -> Any: ...


@dataclass(repr=False)
class RestoreReport:
    """What restore_latest() did: restored (bool), step, components (restored), missing
    (tracked but not in the checkpoint), skipped (key paths kept from the live objects),
    checkpoint (its directory), note (why LATEST was not used, when it was not) and
    stepped_over (damaged or newer-format checkpoints passed over with on_damaged="fallback",
    "step-N: why")."""

    restored: bool = False
    step: int = 0
    components: List[str] = field(default_factory=list)
    missing: List[str] = field(default_factory=list)
    skipped: List[str] = field(default_factory=list)
    checkpoint: str = ""
    note: str = ""
    stepped_over: List[str] = field(default_factory=list)

    def __repr__(self) -> str:
        return (f"RestoreReport(restored={self.restored}, step={self.step}, "
                f"components={self.components}, missing={self.missing}, skipped={self.skipped})")


def _dist() -> Tuple[int, int, Optional[Callable[[], Any]]]:
    d = torch.distributed
    if d.is_available() and d.is_initialized():
        return d.get_rank(), d.get_world_size(), d.barrier
    return 0, 1, None


def _gather(obj: Any) -> List[Any]:
    """Every rank's `obj`, in rank order (a collective: every rank calls it)."""
    out: List[Any] = [None] * torch.distributed.get_world_size()
    torch.distributed.all_gather_object(out, obj)  # type: ignore[no-untyped-call]
    return out


Tracked = Union[Stateful, torch.Tensor]


class Checkpointer:
    # The run's configuration (a str, or anything JSON can write, e.g. vars(args)): its digest is
    # saved in every checkpoint's train component (config_digest), as TrainCounters::config in C++.
    config: Any = ""

    def __init__(self, run_dir: Union[str, "os.PathLike[str]"], keep_last: int = 3,
                 keep_every: int = 0, omit: Iterable[str] = (), required: Iterable[str] = (),
                 on_damaged: Literal["refuse", "fallback"] = "refuse",
                 read_only: bool = False, replicated: Iterable[str] = ()) -> None:
        # A local path or s3://bucket/prefix; any other URL raises here, never a folder "gs:".
        self.run_dir = _core.location(os.fspath(run_dir))
        self.on_damaged = _restore_checks.check_on_damaged(on_damaged)
        self.read_only, self._closed = bool(read_only), False
        self.keep_last, self.keep_every = int(keep_last), int(keep_every)
        self.omit, self.required = set(omit), set(required)
        # Components every rank holds alike (a DDP module tracked as ddp.module): one rank
        # writes each of their tensors (_shard.replicated_components; DDP modules are found).
        self.replicated = set(replicated)
        self._replicas_checked = False
        self.rank, self.world_size, self._barrier = _dist()
        self._objects: Dict[str, Tracked] = {}
        self._journal: Optional[_core.Journal] = None
        self._started = False
        self._bg: Optional[_core.BackgroundSaver] = None  # made on the first non-blocking save
        self._pending: Optional[Tuple[int, List[str]]] = None  # (step, components) in flight
        self._lock: Optional[_core.RunLock] = None
        self._owners: Dict[Any, Dict[str, int]] = {}  # _shard.SaveLayout's cache
        if self.read_only:  # a reader of a live run: no lock, nothing written (docs/python.md)
            return
        _core.make_dirs(self.run_dir)
        # One process writes a run (C++ store::lock_run_dir: RUN/LOCK, flock); rank 0 takes it.
        self._lock = _core.RunLock(self.run_dir) if self.rank == 0 else None

    # --- tracking -----------------------------------------------------------------------------
    def track(self, **objects: Tracked) -> "Checkpointer":
        """Tracks objects by keyword: anything Stateful (state_dict()/load_state_dict(); a
        ckpt.Value holds a Python value) and tensors. The keyword is the component's name in the
        checkpoint."""
        for name, obj in objects.items():
            if name in _RESERVED:
                raise InvalidArgumentError(f"track: {name!r} is reserved for ckpt's own "
                                           "component")
            if isinstance(obj, (bool, int, float, str)):
                raise TypeError(_immutable(name, obj))
            if not isinstance(obj, (torch.Tensor, Stateful)):
                raise TypeError(f"track: {name}={type(obj).__name__} has no "
                                "state_dict()/load_state_dict() and is not a tensor")
            self._objects[name] = obj
        self._replicas_checked = False  # the next save checks the ranks agree (_capture)
        return self

    def _check_names(self) -> None:
        known = set(self._objects) | {"rng"}
        for label, names in (("omit", self.omit), ("required", self.required),
                             ("replicated", self.replicated)):
            unknown = sorted(names - known)
            if unknown:
                raise InvalidArgumentError(f"{label}: unknown component {unknown[0]!r} "
                                           f"(tracked: {', '.join(sorted(known))})")

    def _names(self) -> List[str]:
        names = [n for n in self._objects if n not in self.omit]
        if "rng" not in self.omit:
            names.append("rng")
        return names

    def _loader(self) -> Optional[ResumableLoader]:
        from .loader import ResumableLoader
        for name, obj in self._objects.items():
            if isinstance(obj, ResumableLoader):  # tracked; its counters count even when omitted
                return obj
        return None

    # --- journal --------------------------------------------------------------------------------
    def _event(self, kind: str, durable: bool, **fields: Any) -> None:
        if self.rank != 0 or self.read_only:
            return
        self._check_writable("journal")
        if self._journal is None:
            self._journal = _core.Journal(self.run_dir)
        self._journal.append(kind, json.dumps(fields), durable)

    def _start(self, rep: RestoreReport, durable: bool = True) -> None:
        """The journal's start event; durable=False where a durable event follows at once (one
        fsync, or one PUT of the journal on a store, for both)."""
        if self._started:
            return
        self._started = True
        info: Dict[str, Any] = {"fresh": not rep.restored, "step": rep.step,
                                "omit": sorted(self.omit), "pid": os.getpid(),
                                "producer": "ckpt-python", "grad_accum": 1}
        loader = self._loader()
        if loader is not None:
            info["sampler"] = loader._journal_spec()
        self._event("start", durable, **info)

    def log_progress(self, step: int, lr: Optional[float] = None, loss: Optional[float] = None,
                     **more: Any) -> None:
        """A journal progress event (rank 0; flushed, not fsynced)."""
        self._check_writable("log_progress")
        ev: Dict[str, Any] = {"step": int(step), "lr": lr, "loss": loss}
        loader = self._loader()
        last = loader.last_batch() if loader is not None else None
        if last is not None:
            # the cursor this step's batch started at, and its size (as the C++ writer logs it)
            ev["epoch"], ev["position"], ev["samples"] = last
        ev.update({k: float(v) if isinstance(v, torch.Tensor) else v for k, v in more.items()})
        self._event("progress", False, **ev)

    # --- save -----------------------------------------------------------------------------------
    def _capture(self, step: int, keep: List[torch.Tensor],
                 skipped: List[str]) -> Tuple[_tree.Tree, List[str]]:
        children: Dict[str, _tree.Tree] = {}
        names = self._names()
        layout = _shard.SaveLayout(self.rank, self._owners)
        replicas = _shard.replicated_components(self._objects, self.replicated, self.world_size)
        if "rng" in names:
            children["rng"] = _tree.encode_component(_rng.capture(), "/rng", keep, skipped)
        for name in names:
            if name == "rng":
                continue
            obj = self._objects[name]
            layout.replicas = replicas.get(name)
            if isinstance(obj, torch.Tensor):
                node = _tree.encode_component({"value": obj}, f"/{name}", keep, skipped, layout)
                node["attrs"]["ckpt.plain"] = True
            else:
                node = _tree.encode_component(obj.state_dict(), f"/{name}", keep, skipped,
                                              layout)
            children[name] = node
        layout.replicas = None
        if layout.wholes and not self._replicas_checked:  # the ranks hold them alike, really
            _shard.check_replicas(layout.wholes, self.rank, _gather)
            self._replicas_checked = True
        layout.finish(_tree.tensor_ref, keep)  # every DTensor's box, with its owner
        _tree.sync_device_copies()  # CUDA tensors' pinned host copies are complete from here
        loader = self._loader()
        train: Dict[str, Any] = {"global_step": int(step), "grad_accum_steps": 1,
                                 "grad_accum_pos": 0, "epoch": 0, "samples_seen": 0,
                                 "tokens_seen": 0}
        if loader is not None:
            train["epoch"] = loader.cursor()[0]
            train["samples_seen"] = loader.samples_seen()
        train.update(_env.train_attrs(self.config))
        children["train"] = {"attrs": train, "tensors": {}, "children": {}}
        names = [n for n in children]
        root = {"attrs": _core.root_attrs(producer=_PRODUCER, libtorch_version=torch.__version__,
                                          step=int(step), rank=self.rank,
                                          world_size=self.world_size, components=names),
                "tensors": {}, "children": children}
        return root, names

    def save(self, step: int, blocking: bool = True) -> Dict[str, Any]:
        """blocking=True: writes, commits and applies retention; returns when committed.
        blocking=False: returns after the snapshot (capture + one copy of every tensor's bytes
        into memory the C++ core owns and reuses); the write, fsync, commit, retention and
        journal run on a background thread. A save still in flight is waited for first either
        way, and its failure is raised here (docs/python.md, "Non-blocking saves")."""
        step = _checked_step(step)
        self._check_writable("save")
        if self._lock is not None:
            self._lock.check()  # RUN/LOCK is still the file locked: the run was not deleted
        t0 = time.perf_counter()
        waited = self._pending is not None
        self.wait()
        t1 = time.perf_counter()
        self._check_names()
        keep: List[torch.Tensor] = []
        skipped: List[str] = []
        root, names = self._capture(step, keep, skipped)
        if not blocking:
            return self._submit(int(step), root, names, skipped, t1,
                                (t1 - t0) if waited else None)
        with _interrupts.held():  # a Ctrl-C from here on is raised after the commit
            if self._lock is not None:  # one save at a time of this process's Checkpointers
                self._lock.begin_save()
            try:
                stats = _core.save_rank(self.run_dir, int(step), self.rank, self.world_size, root)
                self._commit(int(step), names)
            finally:
                if self._lock is not None:
                    self._lock.end_save()
            if self.rank == 0:
                self._event("save", True, step=int(step),
                            checkpoint=os.path.basename(stats["dir"]), components=names,
                            bytes=stats["file_bytes"], skipped=skipped)
        return stats

    def _commit(self, step: int, names: List[str]) -> None:
        """Steps 2-5 of the commit protocol, on the training thread: barrier, commit (rank 0),
        barrier, retention."""
        if self._barrier:
            self._barrier()
        if self.rank == 0:
            assert self._lock is not None  # rank 0 of a writable Checkpointer holds RUN/LOCK
            self._lock.check()  # the run directory is still the one this process locked
            _core.commit(self.run_dir, step, self.world_size, names)
        if self._barrier:
            self._barrier()
        if self.rank == 0:
            _core.apply_retention(self.run_dir, self.keep_last, self.keep_every)

    def _submit(self, step: int, root: _tree.Tree, names: List[str], skipped: List[str],
                t_capture: float, waited: Optional[float]) -> Dict[str, Any]:
        # "save" with the checkpoint's name now, after the progress events of the state it
        # holds (what `ckpt coverage` pairs it with); "save" with committed=true|false when the
        # background work ends (the C++ job journals it; with world_size > 1, wait() does).
        taken: Dict[str, Any] = dict(step=step, checkpoint=_core.step_dir_name(step),
                                     components=names, skipped=skipped, blocking=False)
        if waited is not None:
            taken["waited_for_previous_seconds"] = waited
        if self._bg is None:
            self._bg = _core.BackgroundSaver()
        single = self.world_size == 1
        with _interrupts.held():  # in flight and recorded so, or neither
            self._event("save", False, **taken)
            journal = self._journal if (single and self.rank == 0) else None
            info = self._bg.submit(self.run_dir, step, self.rank, self.world_size, root, names,
                                   single, self.keep_last, self.keep_every, journal,
                                   time.perf_counter() - t_capture, self._lock)
            self._pending = (step, names)
            _atexit.watch(self)
        return info

    def wait(self) -> Optional[Dict[str, Any]]:
        """Waits for the save in flight and returns what it did ({"step", "dir", "file_bytes",
        "stall_seconds", "seconds"}; None when nothing was in flight). A failure in the
        background is raised here as its ckpt.errors exception, once."""
        if self._pending is None:
            return None
        with _interrupts.held():  # a Ctrl-C while waiting is raised once the save is settled
            return self._wait_pending()

    def _wait_pending(self) -> Optional[Dict[str, Any]]:
        assert self._pending is not None and self._bg is not None
        step, names = self._pending
        self._pending = None
        if self.world_size == 1:
            return self._bg.wait()  # the C++ job committed and journaled (or raises)
        try:  # world_size > 1: collectives stay on this thread (docs/distributed.md)
            done = self._bg.wait()
            assert done is not None  # a save was in flight
            self._commit(step, names)
        except Exception as e:
            self._event("save", True, step=step, blocking=False, committed=False, error=str(e))
            raise
        self._event("save", True, step=step, blocking=False, committed=True,
                    bytes=done["file_bytes"], stall_seconds=done["stall_seconds"],
                    seconds=done["seconds"])
        return done

    def background_stats(self) -> Optional[Dict[str, Any]]:
        """The snapshot arena and counters of the non-blocking saves ({"arena_capacity",
        "arena_used", "arena_allocations", "submitted", "failed"}); None before the first."""
        return self._bg.stats() if self._bg is not None else None

    # --- restore --------------------------------------------------------------------------------
    def restore_latest(self, check_first: bool = True) -> RestoreReport:
        """Restores every tracked object from the newest committed checkpoint; a fresh start
        when there is none. Nothing live changes unless every tensor was read and verified.

        check_first=False reads the bytes straight into the live tensors, each hash checked as
        its bytes land (no second copy of the state in memory, no second read): a damaged
        tensor still raises, but the live tensors read before it stay overwritten (the error
        says so)."""
        if not self.read_only:
            self._check_writable("restore_latest")
        self.wait()  # a save in flight is committed (or raises) first
        self._check_names()
        rep = RestoreReport()
        latest, opened, rep.stepped_over = _restore_checks.open_latest(
            self.run_dir, self.rank, self.on_damaged)
        if rep.stepped_over:
            rep.note = "stepped over (on_damaged=\"fallback\"): " + "; ".join(rep.stepped_over)
        if not latest:  # a fresh start (required= applies to an existing checkpoint, as in C++)
            self._start(rep)
            return rep
        assert opened is not None  # open_latest opens the checkpoint it returns
        rep.step, rep.checkpoint = latest["step"], latest["dir"]
        rep.note = "; ".join(n for n in (latest["note"], rep.note) if n)
        meta = opened.tree
        have = set(latest["components"]) & set(meta["children"])
        wanted = self._names()
        for name in wanted:
            if name not in have:
                rep.missing.append(name)
                if name in self.required:
                    raise MissingRequiredError(
                        f"{latest['dir']}: required component \"{name}\" is not in the "
                        f"checkpoint (it has: {', '.join(latest['components'])})")
        todo = [n for n in wanted if n in have]
        live = {n: self._live_state(n) for n in todo}
        stored: Dict[str, _tree.Tree] = {}  # each component in torch's layout
        converted: Set[str] = set()  # written by the C++ Checkpointer in its layouts
        dests: Dict[str, _tree.Dest] = {}
        allocs: Dict[str, _tree.Tree] = {}
        in_place: Set[int] = set()
        targets: List[_shard.Target] = []  # boxes of sharded tensors, read by _core.ShardRead
        renamed: Dict[str, Tuple[str, str]] = {}  # module -> (saved, live) wrapper prefixes
        for name in todo:
            sub, sources = meta["children"][name], None
            cxx = name != "rng" and _cxx.is_cxx(sub)
            view = _cxx.torch_view(opened, name, self._objects.get(name)) if cxx else None
            if view is not None:
                sub, sources = view
                converted.add(name)
            stored[name] = sub
            pre = (_restore_checks.wrapper_renames(sub, live[name])
                   if isinstance(self._objects.get(name), torch.nn.Module) else None)
            if pre is not None:  # the live state under the saved names; _apply maps back
                renamed[name] = pre
                live[name] = {pre[0] + k[len(pre[1]):]: v for k, v in live[name].items()}
            _restore_checks.check_object(name, sub, self._objects.get(name), live[name])
            fits = not cxx and self._in_place(name, sub)
            mine: Dict[str, _tree.Dest] = {}
            allocs[name] = _tree.allocate(sub, f"/{name}", mine, live[name],
                                          in_place if fits else None, targets,
                                          self._like(name))
            prefix = f"/{name}/"  # read_into names the file's paths
            dests.update({prefix + sources[k[len(prefix):]]: v for k, v in mine.items()}
                         if sources is not None else mine)
        # Live memory is written only after every hash was checked (check first): ShardRead
        # reads and checks every saved box the targets overlap, writing nothing live; then this
        # rank's own file is read (and checked) into place; then the boxes are copied out.
        # With check_first=False both read straight into the live tensors (ShardRead's own
        # error says when it overwrote some).
        sharded = (_core.ShardRead(latest["dir"], targets, in_place=not check_first,
                                   record=latest.get("record"))
                   if targets else None)
        try:
            if dests:
                opened.read_into(dests, check_first and (bool(in_place) or sharded is not None))
        except CheckpointError as e:
            if check_first:
                raise
            raise type(e)(f"{e} (check_first=False: the live tensors read before the error "
                          "stay overwritten)") from e
        if sharded is not None:
            sharded.copy_out()
        states = {n: _tree.decode(stored[n], allocs[n], live[n], f"/{n}", rep.skipped)
                  for n in todo}
        for n in converted:  # a C++ optimizer in torch's layout: what only torch knows
            opt = self._objects[n]
            if isinstance(opt, torch.optim.Optimizer):
                states[n] = _cxx.finish_optimizer(states[n], opt)
        if "rng" in states:  # before anything else can draw
            _rng.restore(states["rng"])
        for name in todo:
            if name in renamed:
                sp, lp = renamed[name]
                states[name] = {lp + k[len(sp):]: v for k, v in states[name].items()}
            if name != "rng":
                self._apply(name, states[name])
        notes = [rep.note] if rep.note else []
        notes += [f"component \"{n}\": saved with {_keys_under(sp)}, restored into a module "
                  f"with {_keys_under(lp)} (a DDP or torch.compile wrapper added or removed)"
                  for n, (sp, lp) in renamed.items()]
        rep.note = "; ".join(notes)
        rep.components = todo
        rep.restored = True
        restored_objs = [self._objects[n] for n in todo if n != "rng"]
        self._start(rep, durable=False)  # the restore event below makes both durable
        loader = self._loader()
        self._event("restore", True, step=rep.step, checkpoint=os.path.basename(rep.checkpoint),
                    restored=rep.components, missing=rep.missing, skipped=rep.skipped,
                    loader=(dict(zip(("epoch", "position"), loader.cursor()))
                            if loader is not None and any(o is loader for o in restored_objs)
                            else None),
                    note=rep.note, **({"stepped_over": rep.stepped_over}
                                      if rep.stepped_over else {}))
        return rep

    def _in_place(self, name: str, sub: _tree.Tree) -> bool:
        """Whether component `name` is read straight into the live object's tensors: modules
        and optimizers saved by this package (not the C++ layouts, which are converted), whose
        parameter groups match the live optimizer's (checked here, before any byte is read)."""
        obj = self._objects.get(name)
        if name == "rng" or _cxx.is_cxx(sub):
            return False
        if isinstance(obj, torch.optim.Optimizer):
            _check_groups(sub, obj, name)
            return True
        return isinstance(obj, torch.nn.Module)

    def _like(self, name: str) -> Optional[_tree.Like]:
        """For an optimizer: the parameter a stored state path (/name/state/i/...) belongs to,
        the i-th of its param_groups (torch's numbering), so that a fresh optimizer's moments
        are restored as DTensors laid out as their parameters."""
        opt = self._objects.get(name)
        if not isinstance(opt, torch.optim.Optimizer):
            return None
        params = [p for g in opt.param_groups for p in g["params"]]
        head = f"/{name}/state/"

        def like(path: str) -> Optional[torch.Tensor]:
            if not path.startswith(head):
                return None
            i = path[len(head):].split("/", 1)[0]
            return params[int(i)] if i.isdigit() and int(i) < len(params) else None
        return like

    def _live_state(self, name: str) -> Any:
        if name == "rng":
            return None
        obj = self._objects[name]
        if isinstance(obj, torch.Tensor):
            return {"value": obj}
        return obj.state_dict()

    def _apply(self, name: str, state: Any) -> None:
        obj = self._objects[name]
        if isinstance(obj, torch.Tensor):
            with torch.no_grad():
                obj.copy_(state["value"])
        elif isinstance(obj, torch.nn.Module) and _restored_in_place(obj, state):
            pass  # every tensor already is in the module's memory; loading would copy onto itself
        elif isinstance(obj, torch.nn.Module):
            obj.load_state_dict(state)
        else:
            obj.load_state_dict(_Handover(state))

    def value(self, name: str) -> Any:
        """The current value of the ckpt.Value tracked as `name`."""
        return getattr(self._objects[name], "value")  # AttributeError unless a ckpt.Value

    # --- lifetime -------------------------------------------------------------------------------
    def _check_writable(self, call: str) -> None:
        """A read-only or closed Checkpointer writes nothing: save(), log_progress() and (once
        closed) restore_latest() raise instead of writing without RUN/LOCK."""
        if self.read_only:
            raise InvalidArgumentError(f"{call}: this Checkpointer of {self.run_dir} is "
                                       "read-only (read_only=True)")
        if self._closed:
            raise CheckpointError(f"{call}: this Checkpointer of {self.run_dir} is closed "
                                  "(close() released RUN/LOCK); make a new one to write")

    def close(self) -> None:
        """Waits for the in-flight save, closes the journal and releases the run directory; the
        Checkpointer writes nothing after it."""
        try:
            self.wait()
        finally:
            self._closed = True
            if self._journal is not None:
                self._journal.close()
                self._journal = None
            if self._lock is not None:
                self._lock.release()
                self._lock = None

    def _finish_unclosed(self) -> List[str]:
        """At exit or when freed without close(): waits for the save in flight; returns what
        was lost, one message each (ckpt._atexit prints them)."""
        if self._pending is None:
            return []
        if self.world_size == 1:
            try:
                self.wait()
            except CheckpointError as e:
                return [str(e)]
            return []
        step = self._pending[0]  # the commit needs every rank's barrier: not at exit
        self._pending = None
        try:
            assert self._bg is not None  # made by the save that is in flight
            self._bg.wait()
        except CheckpointError as e:
            return [str(e)]
        return [f"background save of step {step}: written but not committed: close() or "
                f"wait() was not called (world size {self.world_size})"]

    def __enter__(self) -> "Checkpointer":
        return self

    def __exit__(self, kind: Optional[Type[BaseException]], exc: Optional[BaseException],
                 tb: Optional[TracebackType]) -> Literal[False]:
        self.close()
        return False

    def __del__(self) -> None:
        try:
            if getattr(self, "_pending", None) is not None:  # freed without close()
                _atexit.print_lost(self._finish_unclosed())  # as the C++ destructor does
            if getattr(self, "_bg", None) is not None:
                self._bg = None  # the C++ destructor waits for the save in flight
            lock = getattr(self, "_lock", None)
            if lock is not None:
                lock.release()
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass


def _immutable(name: str, obj: object) -> str:
    kind = type(obj).__name__
    return (f"track: {name}={obj!r}: a Python {kind} cannot change in place, so every save "
            f"would store {obj!r}. Track a holder and update its value: {name} = "
            f"ckpt.Value({obj!r}); ck.track({name}={name}); {name}.value = ... (docs/python.md, "
            "\"Python values\")")


def _checked_step(step: Any) -> int:
    """save()'s step as an int in [0, _core.MAX_STEP] (the step directory's name holds 12
    digits): TypeError for a bool or anything that is not an integer (9.7 is not step 9),
    InvalidArgumentError (a ValueError) for one out of range, as the C++ core refuses it."""
    if isinstance(step, bool):
        raise TypeError("save: step must be an int, not bool")
    try:
        value = operator.index(step)
    except TypeError:
        raise TypeError(f"save: step must be an int, not {type(step).__name__}") from None
    if not 0 <= value <= _core.MAX_STEP:
        raise InvalidArgumentError(f"save: step {value} is out of range: a checkpoint's step is "
                                   f"in [0, {_core.MAX_STEP}] (its directory name holds 12 "
                                   "digits)")
    return value


def _check_groups(sub: _tree.Tree, opt: torch.optim.Optimizer, name: str) -> None:
    """The saved optimizer's parameter groups against the live one's, as load_state_dict checks
    them, but before restore_latest reads a byte into the live state."""
    from .errors import MismatchError
    groups = sub["children"].get("param_groups")
    if groups is None or groups["attrs"].get("ckpt.kind") not in ("list", "tuple"):
        return
    saved = [len(g["attrs"].get("params", [])) for _, g in
             sorted(groups["children"].items(), key=lambda kv: int(kv[0]))]
    here = [len(g["params"]) for g in opt.param_groups]
    if saved != here:
        raise MismatchError(f"component \"{name}\": the checkpoint's optimizer has parameter "
                            f"groups of {saved} parameters, the live one {here}")


class _Handover(Dict[str, Any]):
    """A restored state dict handed to load_state_dict: its deepcopy copies the containers and
    shares the tensors. Every tensor in it is restore_latest's own — read into the live object's
    memory, or allocated for this restore — and nothing else refers to it, so the copy torch
    1.13's Optimizer.load_state_dict makes (deepcopy(state_dict): a second copy of every moment,
    0.2 s per GB) would only duplicate bytes that are handed over anyway. torch 2.x copies the
    dict shallowly and never gets here. Sharing between entries is kept (one object, one copy)."""

    def __deepcopy__(self, memo: Dict[int, Any]) -> Any:
        return _copy_containers(dict(self), memo)


def _copy_containers(value: Any, memo: Dict[int, Any]) -> Any:
    if isinstance(value, torch.Tensor):
        return value
    if id(value) in memo:
        return memo[id(value)]
    if isinstance(value, dict):  # an OrderedDict or defaultdict stays one
        out = copy(value)
        memo[id(value)] = out
        for k in out:
            out[k] = _copy_containers(value[k], memo)
        return out
    if isinstance(value, list):
        items: List[Any] = []
        memo[id(value)] = items
        items.extend(_copy_containers(v, memo) for v in value)
        return items
    if isinstance(value, tuple):
        return tuple(_copy_containers(v, memo) for v in value)
    return deepcopy(value, memo)


_PLAIN_LOADERS = (torch.nn.Module._load_from_state_dict,
                  torch.nn.modules.batchnorm._NormBase._load_from_state_dict)


def _keys_under(prefix: str) -> str:
    return f"keys under \"{prefix}\"" if prefix else "unprefixed keys"


def _restored_in_place(module: torch.nn.Module, state: Dict[str, Any]) -> bool:
    """True when load_state_dict(state) would change nothing: the keys are the module's own and
    every value is a tensor restore_latest read straight into the module's memory, and nothing in
    the module customises loading (hooks, an overridden load_state_dict or _load_from_state_dict
    other than BatchNorm's, extra state). Then load_state_dict, which would copy each tensor onto
    itself, is skipped (docs/python.md, "Restore in place")."""
    base = torch.nn.Module
    for m in module.modules():
        kind = type(m)
        if (getattr(m, "_load_state_dict_pre_hooks", None)
                or getattr(m, "_load_state_dict_post_hooks", None)
                or kind.load_state_dict is not base.load_state_dict
                or kind._load_from_state_dict not in _PLAIN_LOADERS
                or kind.get_extra_state is not base.get_extra_state):
            return False
    live = module.state_dict()
    if live.keys() != state.keys():
        return False
    for key, v in live.items():
        s = state[key]
        if _shard.is_dtensor(v) or _shard.is_dtensor(s):  # its local shard restored in place
            if not (_shard.is_dtensor(v) and _shard.is_dtensor(s) and s.shape == v.shape
                    and _shard.same_local(s, v)):
                return False
            continue
        if not (isinstance(s, torch.Tensor) and isinstance(v, torch.Tensor) and v.numel() > 0
                and s.data_ptr() == v.data_ptr() and s.dtype == v.dtype
                and s.shape == v.shape and s.stride() == v.stride()):
            return False
    return True


__all__ = ["Checkpointer", "RestoreReport", "Stateful", "CheckpointError"]
