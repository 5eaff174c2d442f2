"""The `rng` component: torch's CPU generator, every CUDA generator when CUDA is initialised,
Python's `random`, numpy's global RNG when numpy is imported. Same group layout as the C++
adapter for the torch generators (rng/cpu/state, rng/cuda/<device>)."""
from __future__ import annotations

import random
import sys
from typing import Any, Dict

import torch

from . import _tree


def capture() -> Dict[str, Any]:
    state: Dict[str, Any] = {"cpu": {"state": torch.get_rng_state()}}
    cuda = _tree.cuda_in_use()
    state["cuda_available"] = bool(torch.cuda.is_available())
    state["cuda_device_count"] = torch.cuda.device_count() if cuda else 0
    if cuda:
        state["cuda"] = {str(i): s for i, s in enumerate(torch.cuda.get_rng_state_all())}
    version, mt, gauss = random.getstate()
    state["python"] = {"version": version, "state": list(mt), "gauss": gauss}
    np = sys.modules.get("numpy")
    if np is not None:
        kind, keys, pos, has_gauss, cached = np.random.get_state()
        state["numpy"] = {"kind": kind, "keys": torch.from_numpy(keys.astype("int64")),
                          "pos": int(pos), "has_gauss": int(has_gauss), "cached": float(cached)}
    return state


def restore(state: Dict[str, Any]) -> None:
    torch.set_rng_state(state["cpu"]["state"])
    if "cuda" in state and torch.cuda.is_available():
        states = [state["cuda"][str(i)] for i in range(len(state["cuda"]))]
        torch.cuda.set_rng_state_all(states[: torch.cuda.device_count()])
    py = state.get("python")
    if py is not None:
        random.setstate((py["version"], tuple(py["state"]), py["gauss"]))
    npst = state.get("numpy")
    if npst is not None:
        import numpy as np
        np.random.set_state((npst["kind"], npst["keys"].numpy().astype(np.uint32), npst["pos"],
                             npst["has_gauss"], npst["cached"]))
