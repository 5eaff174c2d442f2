"""Components written by the C++ Checkpointer (the adapter layouts, docs/format.md), handed to
the live Python objects as state_dicts. A C++-written component is a group without the
``ckpt.kind`` attribute python/ckpt/_tree.py puts on every group it writes.

The conversion is the C++ core's, the one the libtorch adapter uses the other way round
(ckpt/format/torch_layout.h): ckpt._core's OpenRank.torch_layout gives a model's or optimizer's
group in torch's layout before a byte is read (a model without param_names / buffer_names; an
optimizer's state/<param name> and groups/<g> as torch's state/<index> and param_groups/<g>,
numbered in param-group order as torch numbers them), with the file's path of each tensor.
What only torch knows is added here: the live optimizer's own group keys (foreach, maximize,
...) fill what C++ does not record, and each parameter's step becomes the tensor torch keeps.
rng and loader have the same layout on both sides."""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

import torch

from . import _core, _tree
from .errors import MismatchError


def is_cxx(meta: _tree.Tree) -> bool:
    return "ckpt.kind" not in meta["attrs"]


def torch_view(opened: _core.OpenRank, name: str,
               obj: object) -> Optional[Tuple[_tree.Tree, Dict[str, str]]]:
    """(component in torch's layout, {its tensor path: the file's}) for the C++-written
    component `name` tracked as a module or an optimizer; None for any other (stored as is)."""
    if isinstance(obj, torch.nn.Module):
        return opened.torch_layout(name, "module")
    if isinstance(obj, torch.optim.Optimizer):
        return opened.torch_layout(name, "optimizer")
    return None


def finish_optimizer(state: Dict[str, Any], opt: torch.optim.Optimizer) -> Dict[str, Any]:
    """The torch-layout state of a C++-written optimizer, as opt.load_state_dict takes it."""
    live = opt.state_dict()["param_groups"]
    saved = state["param_groups"]
    if len(saved) != len(live):
        raise MismatchError(f"optimizer: the checkpoint has {len(saved)} param groups, the live "
                            f"optimizer {len(live)}")
    groups: List[Dict[str, Any]] = [dict(here, **g) for here, g in zip(live, saved)]
    per_param: Dict[int, Dict[str, Any]] = {}
    for index, st in state["state"].items():
        entry = {k: v for k, v in st.items() if isinstance(v, torch.Tensor)}
        if "step" in st:
            entry["step"] = torch.tensor(float(st["step"]))
        per_param[index] = entry
    return {"state": per_param, "param_groups": groups}
