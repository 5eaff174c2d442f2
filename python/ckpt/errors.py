"""ckpt's exceptions: one class per way a checkpoint can fail, all CheckpointError.

Messages are one line, the same as the CLI's (they come from the C++ core). ckpt._core picks the
class from the C++ Status code, never from the message: kCorrupt -> CorruptCheckpointError,
kMismatch -> MismatchError, kNotFound -> NotFoundError, kLocked -> LockedError,
kInvalidArgument -> InvalidArgumentError, any other -> CheckpointError. A caller's mistake is
an InvalidArgumentError wherever it is found, in Python or in C++ (it is a ValueError too, so
``except ValueError`` keeps working); a value of the wrong Python type is a TypeError.
"""


class CheckpointError(Exception):
    """Base class of every ckpt error."""


class CorruptCheckpointError(CheckpointError):
    """The bytes are there but wrong: a hash mismatch, a truncation, a bad structure."""


class MismatchError(CheckpointError):
    """The checkpoint is intact but does not fit the live objects (shape, dtype, names)."""


class MissingRequiredError(CheckpointError):
    """A component named in ``required=`` is not in the latest checkpoint."""


class LockedError(CheckpointError):
    """Another process holds this run directory (RUN/LOCK, taken by rank 0)."""


class NotFoundError(CheckpointError):
    """A file or tensor that should be there is not."""


class InvalidArgumentError(CheckpointError, ValueError):
    """The caller asked for something that cannot be done."""
