"""The config and environment digests of the `train` component, as the C++ Checkpointer records
them (ckpt/train/checkpointer.cc, docs/format.md): config_digest = XXH3 of the run's config text,
env = a JSON object of what can change a run's numbers, env_digest = XXH3 of that JSON text."""
import json
import platform
import socket

import torch

from . import _core


def config_text(config):
    """The text whose digest is stored: a str as is; anything else as canonical JSON."""
    if isinstance(config, str):
        return config
    return json.dumps(config, sort_keys=True, separators=(",", ":"), default=str)


def environment():
    """The JSON text of the environment: the C++ keys (libtorch, cuda_*, host), torch's version
    standing for libtorch's, and the Python version where C++ records its compiler."""
    cuda = torch.cuda.is_available()
    env = {"libtorch": torch.__version__, "python": platform.python_version(),
           "cuda_available": bool(cuda), "cuda_devices": torch.cuda.device_count() if cuda else 0,
           "cuda_runtime": (torch.version.cuda or "none") if cuda else "none",
           "host": socket.gethostname()}
    return json.dumps(env, separators=(",", ":"))


def train_attrs(config):
    """config_digest, env_digest and env for the train component's attributes."""
    text = environment()
    return {"config_digest": _core.xxh3_hex(config_text(config).encode()),
            "env_digest": _core.xxh3_hex(text.encode()), "env": text}
