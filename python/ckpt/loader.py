"""ckpt.ResumableLoader: a torch DataLoader over ckpt's resumable sampler (ckpt/loader in C++).

Its state is what the training loop consumed, not what workers prefetched. Each batch's
augmentation draws from RNGs seeded from (seed, epoch, batch index) (ckpt._core.batch_seed), so
a batch is the same whichever worker serves it and whatever that worker served before; the
loader itself never draws from the global RNGs (its DataLoader has a private generator)."""
from __future__ import annotations

import random
import sys
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Sized, Tuple, Union

import torch
import torch.utils.data as tud

from . import _core
from .errors import InvalidArgumentError

# (sample id, batch seed, position in batch, batch length): what _BatchSampler yields per item
_Key = Tuple[int, int, int, int]


def _worker_info() -> Any:
    """torch's get_worker_info() (untyped in torch 1.13): None in the training process."""
    info: Callable[[], Any] = getattr(tud, "get_worker_info")
    return info()


def _seed_all(s: int) -> None:
    torch.manual_seed(s & ((1 << 63) - 1))
    random.seed(s)
    np = sys.modules.get("numpy")
    if np is not None:
        np.random.seed(s & 0xFFFFFFFF)


class _SeededDataset(tud.Dataset[Any]):
    """Items are (sample id, batch seed, position in batch, batch length)."""

    def __init__(self, dataset: Any) -> None:
        self.dataset = dataset
        self._saved: Optional[Tuple[torch.Tensor, Any, Any]] = None

    def __len__(self) -> int:
        return len(self.dataset)

    def __getitem__(self, key: _Key) -> Any:
        idx, seed, pos, n = key
        main = _worker_info() is None
        if pos == 0:
            if main:  # in the training process: leave its RNG streams as they were
                np = sys.modules.get("numpy")
                self._saved = (torch.get_rng_state(), random.getstate(),
                               np.random.get_state() if np is not None else None)
            _seed_all(seed)
        try:
            return self.dataset[idx]
        finally:
            if main and pos == n - 1 and self._saved is not None:
                t, r, nps = self._saved
                self._saved = None
                torch.set_rng_state(t)
                random.setstate(r)
                if nps is not None:
                    sys.modules["numpy"].random.set_state(nps)


class _BatchSampler:
    """Batches of one epoch from a copy of the sampler, starting at the loader's cursor; records
    the cursor after each batch so the loader can advance when the loop receives it.

    Without drop_last the epoch's last step may hold fewer positions than ranks; each rank's batch
    is then padded, as DistributedSampler pads, to ceil(positions left / world size) with samples
    from the head of the epoch (Sampler.tail_padding), so no rank gets an empty batch and all get
    the same size. The padding comes after the rank's own samples; the cursor, samples_seen and
    the journal count only the real positions."""

    def __init__(self, loader: ResumableLoader) -> None:
        self.loader = loader

    def __iter__(self) -> Iterator[List[_Key]]:
        s = self.loader._sampler.copy()
        if s.at_epoch_end():
            e, _ = s.cursor()
            s.set_cursor(e + 1, 0)
        epoch, _ = s.cursor()
        index = self.loader._batch_index(s)
        while True:
            cur = s.cursor()
            if cur[0] != epoch or s.at_epoch_end():
                return
            ids = s.next_batch()
            pad = s.tail_padding(*cur)
            seed = _core.batch_seed(self.loader.seed, epoch, index)
            after = s.cursor()
            n = (after[1] if after[0] == cur[0] else self.loader._n) - cur[1]  # global samples
            self.loader._pending.append((cur, after, n, len(pad)))
            index += 1
            ids = ids + pad
            yield [(int(i), seed, p, len(ids)) for p, i in enumerate(ids)]

    def __len__(self) -> int:
        s = self.loader._sampler
        return s.remaining_steps() if not s.at_epoch_end() else s.steps_per_epoch()


class ResumableLoader:
    """Iterates batches like torch.utils.data.DataLoader; one `for` loop = the rest of the
    current epoch (the next epoch once it is exhausted). Track it with Checkpointer.track.

    Every rank takes the same number of steps per epoch and never an empty batch: without
    drop_last an epoch's last step pads each rank's batch with samples from the head of the epoch
    (padding() says how many); with drop_last=True the global tail that does not fill a whole
    step is left out of that epoch.

    With a DeviceMesh (`mesh=`, `dp_dim=` the name of its data-parallel dimension, or a tuple
    of names: HSDP's replicate and shard dimensions together) the data-parallel rank and size
    are this rank's coordinate along that dimension and its size: the ranks of one tensor-
    parallel group see the same batches."""

    def __init__(self, dataset: Sized, batch_size: int, seed: int = 0, shuffle: bool = True,
                 drop_last: bool = False, num_workers: int = 0, world_size: Optional[int] = None,
                 rank: Optional[int] = None, mesh: Any = None,
                 dp_dim: Union[str, Sequence[str], None] = None,
                 **dataloader_kwargs: Any) -> None:
        for k in ("sampler", "batch_sampler", "shuffle", "generator", "drop_last"):
            if k in dataloader_kwargs:
                raise InvalidArgumentError(f"ResumableLoader: {k}= is ckpt's to set")
        d = torch.distributed
        dist = d.is_available() and d.is_initialized()
        if mesh is not None:
            if world_size is not None or rank is not None:
                raise InvalidArgumentError("ResumableLoader: give mesh= or world_size=/rank=, "
                                           "not both")
            world_size, rank = mesh_dp(mesh, dp_dim)
        elif dp_dim is not None:
            raise InvalidArgumentError("ResumableLoader: dp_dim= needs mesh=")
        self.world_size = world_size if world_size is not None else (
            d.get_world_size() if dist else 1)
        self.rank = rank if rank is not None else (d.get_rank() if dist else 0)
        self.dataset, self.batch_size, self.seed = dataset, int(batch_size), int(seed)
        self.shuffle, self.drop_last = bool(shuffle), bool(drop_last)
        self._sampler = _core.Sampler(len(dataset), self.seed, self.shuffle, self.drop_last,
                                      self.world_size, self.rank, self.batch_size)
        self._n = len(dataset)
        self._samples = 0
        # (epoch, position, global samples) of the batch last consumed
        self._last: Optional[Tuple[int, int, int]] = None
        self._padding = 0  # padding items at the end of that batch
        # (cursor before, cursor after, global samples, padding) of each batch made, not yet taken
        self._pending: List[Tuple[Tuple[int, int], Tuple[int, int], int, int]] = []
        # A private generator: DataLoader draws its base seed from it, never from torch's global.
        self._generator = torch.Generator()
        self._generator.manual_seed(self.seed)
        self._loader = tud.DataLoader(_SeededDataset(dataset), batch_sampler=_BatchSampler(self),
                                      num_workers=num_workers, generator=self._generator,
                                      **dataloader_kwargs)

    def _batch_index(self, s: _core.Sampler) -> int:
        # batch index within the epoch = global positions consumed / global batch
        _, pos = s.cursor()
        g = self.batch_size * self.world_size
        return pos // g

    def __iter__(self) -> Iterator[Any]:
        self._pending = []
        for batch in self._loader:
            start, after, n, pad = self._pending.pop(0)
            self._sampler.set_cursor(*after)
            self._samples += n
            self._last = (start[0], start[1], n)
            self._padding = pad
            yield batch

    def __len__(self) -> int:
        return len(self._loader.batch_sampler)  # type: ignore[arg-type]  # _BatchSampler

    def cursor(self) -> Tuple[int, int]:
        """(epoch, global position in that epoch) of what the loop has consumed."""
        return self._sampler.cursor()

    def last_batch(self) -> Optional[Tuple[int, int, int]]:
        """(epoch, position, global samples) of the batch the loop received last: the cursor it
        started at, as the journal's progress events record it; None before the first."""
        return self._last

    def padding(self) -> int:
        """How many items at the end of the batch the loop received last repeat samples from the
        head of the epoch (0 except in an epoch's last step without drop_last): mask them out of
        the loss, or not, as with DistributedSampler's padding. Never counted as consumed."""
        return self._padding

    def samples_seen(self) -> int:
        return self._samples

    def state_dict(self) -> Dict[str, Any]:
        """The C++ loader node's attributes (ckpt/loader/sampler_node.h), plus samples_seen."""
        st = self._sampler.state()
        st["samples_seen"] = self._samples
        return st

    def load_state_dict(self, state: Dict[str, Any]) -> None:
        state = dict(state)
        self._samples = int(state.pop("samples_seen", 0))
        self._sampler.load_state(state)

    def _journal_spec(self) -> Dict[str, Any]:
        return {"dataset_size": len(self.dataset), "seed": self.seed, "shuffle": self.shuffle,
                "drop_last": self.drop_last, "world_size": self.world_size,
                "batch_size": self.batch_size, "kind": "ckpt"}


def mesh_dp(mesh: Any, dp_dim: Union[str, Sequence[str], None]) -> Tuple[int, int]:
    """(data-parallel size, data-parallel rank) of this rank on DeviceMesh `mesh`: its size
    along dimension(s) `dp_dim` and its coordinate there (several dimensions count in row-major
    order, outer first). dp_dim may be None on a 1-D mesh."""
    names = list(getattr(mesh, "mesh_dim_names", None) or [])
    shape = [int(s) for s in mesh.mesh.shape]
    if dp_dim is None:
        if len(shape) != 1:
            raise InvalidArgumentError(f"ResumableLoader: mesh has {len(shape)} dimensions "
                                       f"{tuple(names)}: say which is data-parallel (dp_dim=)")
        dims = [0]
    else:
        wanted = [dp_dim] if isinstance(dp_dim, str) else list(dp_dim)
        for w in wanted:
            if w not in names:
                raise InvalidArgumentError(f"ResumableLoader: dp_dim {w!r} is not a dimension "
                                           f"of the mesh (its dimensions: {tuple(names)})")
        dims = [names.index(w) for w in wanted]
    coord = mesh.get_coordinate()
    if coord is None:
        raise InvalidArgumentError("ResumableLoader: this rank is not part of the mesh")
    size, rank = 1, 0
    for i in dims:
        size *= shape[i]
        rank = rank * shape[i] + int(coord[i])
    return size, rank
