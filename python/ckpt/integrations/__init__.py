"""ckpt.integrations: ckpt's checkpoints for the training frameworks (docs/python.md,
"Framework integrations").

- ckpt.integrations.hf: CkptCallback, a transformers.Trainer callback;
- ckpt.integrations.lightning: CkptIO, a Lightning CheckpointIO plugin, and its ResumableLoader;
- ckpt.integrations.accelerate: save_state / load_state with Accelerate's signatures.

Each module imports its framework when it is imported and nothing else, so each works without
the others installed; a missing framework raises ImportError naming the package to install."""
import importlib
from typing import Any

_PIP_NAMES = {"transformers": "transformers", "lightning": "lightning",
              "accelerate": "accelerate"}


def require(package: str, integration: str) -> Any:
    """The module `package`, imported for `integration`; on failure an ImportError that names
    the package. The module is typed Any on purpose: the frameworks need not be installed where
    mypy runs."""
    try:
        return importlib.import_module(package)
    except ImportError as e:
        top = package.split(".")[0]
        raise ImportError(f"{integration} needs the {top!r} package, which cannot be imported "
                          f"here (pip install {_PIP_NAMES.get(top, top)}): {e}") from e


__all__ = ["require"]
