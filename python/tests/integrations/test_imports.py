"""Each integration imports only its own framework: without it, importing the module raises an
ImportError that names the package to install, and ckpt.integrations itself always imports."""
import importlib.util
import subprocess
import sys

import pytest

from conftest import BUILD

CASES = [("hf", "transformers"), ("lightning", "lightning"), ("accelerate", "accelerate")]


@pytest.mark.parametrize("module,package", CASES)
def test_a_missing_framework_is_named(module, package):
    if importlib.util.find_spec(package) is not None:
        pytest.skip(f"{package} is installed for {sys.executable}")
    code = f"import ckpt.integrations\nimport ckpt.integrations.{module}"
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       env={"PYTHONPATH": str(BUILD / "python"), "PATH": "/usr/bin:/bin"})
    assert p.returncode == 1
    last = p.stderr.strip().splitlines()[-1]
    assert last.startswith(f"ImportError: ckpt.integrations.{module} needs the {package!r} "
                           f"package"), p.stderr
    assert f"pip install {package}" in last
