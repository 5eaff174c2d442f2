"""Ctrl-C held back across the steps of a save that belong together (docs/python.md, "Ctrl-C and
exit").

A KeyboardInterrupt is raised by Python's SIGINT handler at the first bytecode after the signal,
which may be the first one after a C++ call returned: after the rank file became durable and
before the commit, or after a background save was submitted and before it was recorded as in
flight. Inside ``held()`` the handler only notes the signal; on leaving, the handler that was
installed before runs once (for Python's default one: KeyboardInterrupt is raised there, after
the commit). Off the main thread, or when SIGINT is ignored or left to the OS, nothing changes."""
from __future__ import annotations

import signal
import threading
from contextlib import contextmanager
from types import FrameType
from typing import Iterator, List, Optional


@contextmanager
def held() -> Iterator[None]:
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.getsignal(signal.SIGINT)
    if not callable(previous):  # SIG_IGN, SIG_DFL, or a handler set outside Python
        yield
        return
    frames: List[Optional[FrameType]] = []
    signal.signal(signal.SIGINT, lambda signum, frame: frames.append(frame))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
        if frames:
            previous(signal.SIGINT, frames[0])
