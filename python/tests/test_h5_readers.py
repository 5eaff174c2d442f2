"""A rank file written by ckpt's own HDF5 encoder (ckpt/h5/encode.h) reads the same through
Debian's h5py (HDF5 1.10) and through PyPI's newest h5py (its own HDF5, 2.x at the time of
writing): every group, dataset (dtype, shape, bytes) and attribute. The PyPI one comes in a venv
under the build tree made on first use; without PyPI that half skips with one line."""
import os
import pathlib
import subprocess
import sys
import venv

import pytest
import torch

import ckpt
from conftest import BUILD

READ = r'''
import hashlib, sys
import h5py, numpy as np
f = h5py.File(sys.argv[1], "r")
out = []
def attrs(obj):
    return sorted(((k, v.tolist() if hasattr(v, "tolist") else v) for k, v in obj.attrs.items()),
                  key=str)
def visit(name, obj):
    if isinstance(obj, h5py.Dataset):
        data = obj[()] if obj.shape != (0,) else b""
        raw = data if isinstance(data, bytes) else np.asarray(data).tobytes()
        out.append((name, str(obj.dtype), obj.shape, hashlib.sha1(raw).hexdigest(), attrs(obj)))
    else:
        out.append((name, attrs(obj)))
f.visititems(visit)
out.append(("/", attrs(f)))
print(h5py.version.hdf5_version, len(out), hashlib.sha1(repr(out).encode()).hexdigest())
'''


class Extra:
    """Every kind of value the Python package stores, beside a model and AdamW."""

    def state_dict(self):
        return {"bf16": torch.arange(12, dtype=torch.float32).reshape(3, 4).bfloat16(),
                "half": torch.linspace(-1, 1, 5).half(), "cplx": torch.ones(2, dtype=torch.cfloat),
                "flags": torch.tensor([True, False]), "i8": torch.arange(5, dtype=torch.int8),
                "scalar": torch.tensor(3.5, dtype=torch.float64), "empty": torch.zeros(0, 3),
                "names": ["a", "b\u00fc", ""], "nested": {"x": 1, "y": [1.5, 2.5], "z": "text"},
                "none": None, "big": list(range(3000))}

    def load_state_dict(self, sd):
        pass


@pytest.fixture(scope="module")
def rank_file(tmp_path_factory):
    torch.manual_seed(0)
    model = torch.nn.Sequential(*[torch.nn.Linear(16, 16) for _ in range(12)],
                                torch.nn.LayerNorm(16))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    model(torch.randn(4, 16)).sum().backward()
    opt.step()
    run = tmp_path_factory.mktemp("h5") / "run"
    with ckpt.Checkpointer(str(run)) as ck:
        ck.track(model=model, optimizer=opt, extra=Extra())
        ck.save(7)
    (path,) = run.glob("step-*/rank-00000.h5")
    return path


def read_with(python, path):
    p = subprocess.run([python, "-c", READ, str(path)], capture_output=True, text=True,
                       timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    version, count, digest = p.stdout.split()
    return version, int(count), digest


def newest_h5py():
    """A venv with PyPI's h5py (cached in the build tree), or None with the reason."""
    where = pathlib.Path(os.environ.get("CKPT_H5PY_VENV", BUILD / "python" / "h5py-venv"))
    py = where / "bin" / "python"
    if py.exists() and subprocess.run([str(py), "-c", "import h5py"]).returncode == 0:
        return str(py), ""
    venv.create(where, with_pip=True, clear=True)
    p = subprocess.run([str(py), "-m", "pip", "install", "-q", "--disable-pip-version-check",
                        "h5py", "numpy"], capture_output=True, text=True, timeout=600)
    if p.returncode != 0:
        return None, "PyPI's h5py could not be installed: " + (p.stderr.strip().splitlines()
                                                             or ["?"])[-1]
    return str(py), ""


def test_debian_and_pypi_h5py_read_the_same_file(rank_file):
    ours = read_with(sys.executable, rank_file)
    assert ours[1] > 40  # groups, datasets and the root
    py, why = newest_h5py()
    if py is None:
        pytest.skip(why)
    theirs = read_with(py, rank_file)
    print(f"HDF5 {ours[0]} and {theirs[0]}: {ours[1]} objects, digest {ours[2][:16]}")
    assert theirs[0] != ours[0]  # two HDF5 libraries, or the test proves nothing
    assert theirs[1:] == ours[1:]


def test_h5dump_reads_the_file(rank_file):
    p = subprocess.run(["h5dump", "-A", str(rank_file)], capture_output=True, text=True,
                       timeout=300)
    assert p.returncode == 0, p.stderr
    assert 'DATASET "0.weight"' in p.stdout and "H5T_STD_I8LE" in p.stdout
