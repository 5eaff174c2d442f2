"""What a process that ends without close() must not lose: the failure of its last non-blocking
save (docs/python.md, "Ctrl-C and exit").

At exit, every Checkpointer with a save in flight is waited for (one freed earlier without
close() prints what it lost when it is freed, as the C++ destructor does). A failure (or, with
several ranks, a save written but never committed) is printed on stderr, one line each starting
"ckpt:", and the process's exit status is made non-zero: Python gives an exit handler no way to
set it, so sys.stderr is wrapped in an object whose flush() fails once the interpreter is
finalizing, and CPython then exits with status 120 ("flushing buffered data failed"), after
every other exit handler has run and every stream was flushed. Where the interpreter has no
sys.stderr the lines cannot be printed and the status stays what it was."""
from __future__ import annotations

import atexit
import sys
import weakref
from typing import TYPE_CHECKING, Any, List, TextIO

if TYPE_CHECKING:
    from .checkpointer import Checkpointer

# Checkpointers that submitted a non-blocking save
_pending: "weakref.WeakSet[Checkpointer]" = weakref.WeakSet()


def watch(checkpointer: Checkpointer) -> None:
    _pending.add(checkpointer)


class _FailAtFinalize:
    """sys.stderr, whose flush() raises once Python is finalizing (CPython then exits 120)."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        return self._stream.write(text)

    @property
    def closed(self) -> bool:
        return self._stream.closed

    def flush(self) -> None:
        self._stream.flush()
        if sys.is_finalizing():
            raise OSError("ckpt: the exit status is 120: a non-blocking save was lost")

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def print_lost(messages: List[str]) -> bool:
    """Prints each message on stderr as one line starting "ckpt: "; False when there was
    nothing to print or nowhere to print it."""
    if not messages or sys.stderr is None:
        return False
    for m in messages:  # one line each, whatever the message holds (HDF5's carry a ctime "\n")
        print("ckpt: " + m.strip().replace("\r", "\\r").replace("\n", "\\n"),
              file=sys.stderr)
    sys.stderr.flush()
    return True


def _report() -> None:
    lost: List[str] = []
    for ck in list(_pending):
        try:
            lost += ck._finish_unclosed()
        except Exception as e:  # noqa: BLE001 - reported, never raised at exit
            lost.append(str(e))
    if print_lost(lost):
        sys.stderr = _FailAtFinalize(sys.stderr)  # type: ignore[assignment]  # a TextIO by duck


atexit.register(_report)
