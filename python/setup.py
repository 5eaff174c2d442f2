"""`pip install ./python` / `pip wheel ./python`: setuptools drives the same CMake build as the
README (the repository root one level up), configured for the wheel (CKPT_PYTHON_WHEEL: only
ckpt._core and what it links), building only ckpt._core, then packages it with
python/ckpt/*.py. _ckpt_build.py (the build backend) then vendors the shared libraries the
extension needs beyond what a manylinux wheel may assume (auditwheel repair). docs/install.md."""
import os
import pathlib
import shutil
import subprocess
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parent


def tool(module, attr, name):
    """The PyPI package's executable (a declared build requirement), else the one on PATH (a
    --no-build-isolation build uses what the environment has)."""
    try:
        return str(pathlib.Path(getattr(__import__(module), attr)) / name)
    except (ImportError, AttributeError):
        return shutil.which(name)


def say(*words):
    print("ckpt build:", *words, flush=True)


class CMakeBuild(build_ext):
    def build_extension(self, ext):
        # CKPT_PIP_CMAKE_DIR: where the CMake tree goes (default: setuptools' build_temp, which
        # pip keeps in python/build/ between builds of a checkout); a reused folder reconfigures
        # quickly and rebuilds only what changed, and ccache (when installed) serves the rest.
        build = pathlib.Path(os.environ.get("CKPT_PIP_CMAKE_DIR") or
                             pathlib.Path(self.build_temp) / "cmake").resolve()
        cmake = tool("cmake", "CMAKE_BIN_DIR", "cmake")
        if cmake is None:
            sys.exit("ckpt build: no cmake (a declared build requirement: pip installs it from "
                     "PyPI unless --no-build-isolation; Debian: apt install cmake)")
        ninja = tool("ninja", "BIN_DIR", "ninja")
        args = [cmake, "-S", str(ROOT), "-B", str(build), "-DCMAKE_BUILD_TYPE=Release",
                # warnings are the developers' (scripts/build.sh keeps -Werror), not an installer's
                "-DCKPT_PYTHON_WHEEL=ON", "-DCKPT_WERROR=OFF", "-DCKPT_WITH_TORCH=OFF",
                "-DCKPT_WITH_CUDA=OFF", "-DCKPT_BUILD_TESTS=OFF", "-DCKPT_WITH_PYTHON=ON",
                f"-DPython3_EXECUTABLE={sys.executable}"]
        try:
            import pybind11
            args.append(f"-Dpybind11_DIR={pybind11.get_cmake_dir()}")
        except ImportError:
            pass  # --no-build-isolation: the system's pybind11 (Debian: pybind11-dev)
        cache = build / "CMakeCache.txt"
        generator = "Ninja" if ninja else "Unix Makefiles"
        if cache.exists() and f"CMAKE_GENERATOR:INTERNAL={generator}\n" not in cache.read_text():
            say(f"{build}: configured with another generator; configuring afresh")
            cache.unlink()
            shutil.rmtree(build / "CMakeFiles", ignore_errors=True)
        args += ["-G", generator] + ([f"-DCMAKE_MAKE_PROGRAM={ninja}"] if ninja else [])
        say("configuring:", " ".join(args))
        subprocess.check_call(args)
        jobs = os.environ.get("CMAKE_BUILD_PARALLEL_LEVEL") or str(os.cpu_count() or 2)
        say(f"building ckpt._core in {build} with {jobs} jobs (pip -v shows each step)")
        subprocess.check_call([cmake, "--build", str(build), "--target", "ckpt_python_core",
                               "-j", jobs])
        built = next((build / "python" / "ckpt").glob("_core*.so"))
        dest = pathlib.Path(self.get_ext_fullpath(ext.name))
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(built, dest)
        say("built", dest.name)


setup(ext_modules=[Extension("ckpt._core", sources=[])], cmdclass={"build_ext": CMakeBuild})
