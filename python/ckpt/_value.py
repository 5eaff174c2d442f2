"""ckpt.Value: a holder for a Python value a Checkpointer tracks (docs/python.md, "Python values").

Python's ints, floats, bools and strs cannot change in place: track(step=0) could only ever save
the 0 it was given. A Value is the object whose ``value`` the training loop updates and the
Checkpointer saves at each save() and sets on restore."""
from __future__ import annotations

from typing import Any, Dict


class Value:
    """Holds one value: anything a state_dict may hold (int, float, bool, str, None, bytes, a
    tensor, or dicts, lists and tuples of them)."""

    def __init__(self, value: Any = None) -> None:
        self.value = value

    def state_dict(self) -> Dict[str, Any]:
        return {"value": self.value}

    def load_state_dict(self, state: Dict[str, Any]) -> None:
        self.value = state["value"]

    def __repr__(self) -> str:
        return f"ckpt.Value({self.value!r})"
