"""`pip install ./python`: setuptools drives the same CMake build as the README (the repository
root one level up), building only ckpt._core, then packages build/python/ckpt/."""
import os
import pathlib
import shutil
import subprocess
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parent


class CMakeBuild(build_ext):
    def build_extension(self, ext):
        # CKPT_PIP_CMAKE_DIR: where the CMake tree goes (default: setuptools' build_temp); a
        # fixed folder lets a rebuild reuse its configuration and ccache its objects.
        build = pathlib.Path(os.environ.get("CKPT_PIP_CMAKE_DIR") or
                             pathlib.Path(self.build_temp) / "cmake").resolve()
        subprocess.check_call(["cmake", "-S", str(ROOT), "-B", str(build),
                               "-DCMAKE_BUILD_TYPE=Release", "-DCKPT_WITH_TORCH=OFF",
                               "-DCKPT_BUILD_TESTS=OFF", "-DCKPT_WITH_PYTHON=ON",
                               f"-DPython3_EXECUTABLE={sys.executable}"])
        jobs = os.environ.get("CMAKE_BUILD_PARALLEL_LEVEL", "2")
        subprocess.check_call(["cmake", "--build", str(build), "--target", "ckpt_python_core",
                               "-j", jobs])
        built = next((build / "python" / "ckpt").glob("_core*.so"))
        dest = pathlib.Path(self.get_ext_fullpath(ext.name))
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(built, dest)


setup(ext_modules=[Extension("ckpt._core", sources=[])], cmdclass={"build_ext": CMakeBuild})
