"""The venv the integration tests train with (conftest.py's fw_python): --system-site-packages
(Debian's torch 1.13 and numpy stay visible) and pinned transformers, accelerate and lightning
from PyPI, made once under the build tree and reused. Run as a script, it makes the venv if it is
missing or lacks a pin (scripts/test.sh does so while the build compiles), and prints one line:
  /usr/bin/python3 python/tests/integrations/fw_venv.py BUILD_DIR/python/integrations-venv
Exits 0 also when PyPI is unreachable (the tests then skip, or fail under CI, as conftest says)."""
import json
import os
import pathlib
import shutil
import subprocess
import sys
import urllib.request

# Versions that support torch 1.13 (Debian 12's python3-torch). lightning is installed without
# its dependency list, which asks for torch>=1.13.0 and so refuses Debian's 1.13.0a0 build.
PINS = ["transformers==4.40.2", "accelerate==0.30.1", "torchmetrics==1.4.0",
        "lightning-utilities==0.11.2", "fsspec", "pyyaml", "tqdm"]
NO_DEPS = ["lightning==2.2.5"]
WANT = {"transformers": "4.40.2", "accelerate": "0.30.1", "lightning": "2.2.5"}


def has_versions(python):
    code = ("import json, transformers, accelerate, lightning; print(json.dumps({m.__name__: "
            "m.__version__ for m in (transformers, accelerate, lightning)}))")
    p = subprocess.run([str(python), "-c", code], capture_output=True, text=True)
    return p.returncode == 0 and json.loads(p.stdout.strip().splitlines()[-1]) == WANT


def index_reachable():
    url = os.environ.get("PIP_INDEX_URL", "https://pypi.org/simple/").rstrip("/") + "/pip/"
    try:
        with urllib.request.urlopen(url, timeout=10):
            return True
    except Exception:  # noqa: BLE001 - any failure means: no index
        return False


def make_venv(venv):
    base = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
    subprocess.run([base, "-m", "venv", "--system-site-packages", "--without-pip", str(venv)],
                   check=True)
    py = venv / "bin" / "python"
    cons = venv / "constraints.txt"
    torch_version = subprocess.run([str(py), "-c", "import torch; print(torch.__version__)"],
                                   capture_output=True, text=True, check=True).stdout.strip()
    cons.write_text(f"torch=={torch_version}\n")  # never let pip replace the system's torch
    for extra in (["-c", str(cons), *PINS], ["--no-deps", *NO_DEPS]):
        p = subprocess.run([str(py), "-m", "pip", "install", "-q", *extra],
                           capture_output=True, text=True)
        if p.returncode != 0:
            raise RuntimeError(f"pip install {' '.join(extra)} failed:\n{p.stdout}{p.stderr}")
    return py


def ensure(venv):
    """The venv's python when it has the pins, made afresh when it has not; None without PyPI."""
    venv = pathlib.Path(venv)
    py = venv / "bin" / "python"
    if py.exists() and has_versions(py):
        return py
    if not index_reachable():
        return None
    shutil.rmtree(venv, ignore_errors=True)
    return make_venv(venv)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: fw_venv.py VENV_DIR")
    try:
        made = ensure(sys.argv[1])
    except (OSError, RuntimeError, subprocess.CalledProcessError) as e:
        # Not fatal here: the tests make it again and fail there with the whole story.
        print(f"fw_venv: {sys.argv[1]}: not made: {str(e).splitlines()[0]}")
        sys.exit(0)
    print(f"fw_venv: {made} has {WANT}" if made else
          "fw_venv: skip: package index unreachable (no integrations venv)")
