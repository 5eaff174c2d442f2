"""The config and environment digests of the `train` component, as the C++ Checkpointer records
them (docs/format.md, "train"): config_digest = XXH3 of the run's config text, env = the JSON
object of what can change a run's numbers (its text made by the C++ core,
ckpt._core.environment_json, as the C++ Checkpointer makes it), env_digest = XXH3 of that
text."""
from __future__ import annotations

import json
import platform
import socket
from typing import Any, Dict

import torch

from . import _core


def config_text(config: Any) -> str:
    """The text whose digest is stored: a str as is; anything else as canonical JSON."""
    if isinstance(config, str):
        return config
    return json.dumps(config, sort_keys=True, separators=(",", ":"), default=str)


def environment() -> str:
    """The JSON text of the environment: the C++ record (libtorch, cuda_*, host), torch's version
    standing for libtorch's, and the Python version where C++ records its compiler."""
    cuda = torch.cuda.is_available()
    return _core.environment_json(
        libtorch=torch.__version__, toolchain_key="python", toolchain=platform.python_version(),
        cuda_available=bool(cuda), cuda_devices=torch.cuda.device_count() if cuda else 0,
        cuda_runtime=(torch.version.cuda or "none") if cuda else "none",
        host=socket.gethostname())


def train_attrs(config: Any) -> Dict[str, str]:
    """config_digest, env_digest and env for the train component's attributes."""
    text = environment()
    return {"config_digest": _core.xxh3_hex(config_text(config).encode()),
            "env_digest": _core.xxh3_hex(text.encode()), "env": text}
