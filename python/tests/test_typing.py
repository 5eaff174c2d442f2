"""`mypy --strict python/ckpt` is clean: every function annotated, ckpt._core typed by its stub
(python/ckpt/_core.pyi). mypy is Debian's python3-mypy (scripts/install-deps.sh --test); where it
is missing the test skips, except in CI (CI=true), where a missing checker is a failure."""
import importlib.util
import os
import subprocess
import sys

import pytest

from conftest import ROOT


def test_mypy_strict_is_clean_on_the_package():
    if importlib.util.find_spec("mypy") is None:
        if os.environ.get("CI") == "true":
            pytest.fail("mypy is not installed (python3-mypy: scripts/install-deps.sh --test)")
        pytest.skip("mypy is not installed (python3-mypy: scripts/install-deps.sh --test)")
    # torch's stubs take minutes cold, seconds from the cache; kept outside the checkout (like
    # ccache) so a fresh clone reuses what an earlier one checked.
    cache = os.environ.get("CKPT_MYPY_CACHE",
                           os.path.join(os.path.expanduser("~"), ".cache", "ckpt-mypy"))
    p = subprocess.run([sys.executable, "-m", "mypy", "--strict", "--cache-dir", str(cache),
                        "ckpt"], cwd=ROOT / "python", capture_output=True, text=True,
                       timeout=1200)
    assert p.returncode == 0, p.stdout + p.stderr
