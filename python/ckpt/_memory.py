"""Host memory for the tensors a restore allocates and fills: a fresh optimizer's moments, a
tensor with no live counterpart, a whole tensor a sharded one is cut from.

Faulting in fresh memory a 4 KiB page at a time cost this project's development VM more than
reading the checkpoint into it (0.48 s per GB against 0.16 s). Memory malloc already holds free
(a model built whole, then sharded, left its full tensors' memory there) costs nothing to touch
again, and torch.empty takes it. Otherwise a tensor of at least 2 MiB is put in memory of the
core's (ckpt/io/host_memory.h) whose 2 MiB-aligned part is advised to use transparent huge pages
(0.15 s per GB); it reaches torch through DLPack, so the tensor owns it and frees it from any
thread without the GIL. Smaller tensors, and every tensor when the kernel offers no huge pages
(or CKPT_HUGE_PAGES=0), come from torch.empty. The rule is the core's prefer_host_memory, which
the C++ Checkpointer's fresh moments follow too."""
from __future__ import annotations

from typing import Sequence

import torch
from torch.utils.dlpack import from_dlpack

from . import _core


def empty(shape: Sequence[int], dtype: torch.dtype) -> torch.Tensor:
    """An uninitialised contiguous CPU tensor, as torch.empty(shape, dtype=dtype)."""
    numel = 1
    for s in shape:
        numel *= int(s)
    nbytes = numel * torch.empty(0, dtype=dtype).element_size()
    if not _core.prefer_host_memory(nbytes):
        return torch.empty(tuple(shape), dtype=dtype)
    raw = from_dlpack(_core.host_tensor_capsule(nbytes))
    return raw.view(dtype).view(tuple(shape))
