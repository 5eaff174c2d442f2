"""ckpt: complete, verified, bit-exact checkpoints for PyTorch training code (docs/python.md).

A thin layer over ckpt's C++ core (the extension ckpt._core, which links no libtorch)."""
from .checkpointer import Checkpointer, RestoreReport, Stateful
from .errors import (CheckpointError, CorruptCheckpointError, InvalidArgumentError, LockedError,
                     MismatchError, MissingRequiredError, NotFoundError)
from .loader import ResumableLoader
from ._value import Value

__version__ = "0.1.0"
__all__ = ["Checkpointer", "RestoreReport", "Stateful", "ResumableLoader", "Value",
           "CheckpointError", "CorruptCheckpointError", "MismatchError", "MissingRequiredError",
           "LockedError", "NotFoundError", "InvalidArgumentError"]
