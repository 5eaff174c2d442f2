#!/usr/bin/env bash
# ctest install_pip: `pip install ./python` into a throwaway venv, offline, then `import ckpt` from
# the venv (not from the build tree) and a tiny save/restore of a torch model and AdamW.
# The venv has --system-site-packages so Debian's python3-torch, numpy, setuptools and wheel are
# visible; --no-build-isolation --no-deps keeps pip off the network. It uses Debian's pip module
# (python3-pip) from the system site, so python3-venv's ensurepip is not needed either.
# The build backend (python/_ckpt_build.py) finds no auditwheel in this environment and installs
# setuptools' wheel unrepaired (it links the system's HDF5): install_wheel (wheel_test.sh) checks
# the repaired, portable wheel, with its build requirements from PyPI.
# Exits 77 (ctest: skipped) with one line saying what is missing when the interpreter lacks
# pip, setuptools, wheel or torch. Usage: pip_test.sh SOURCE_DIR BUILD_DIR PYTHON
set -euo pipefail
src="$1" build="$2" py="$3"
for mod in pip setuptools wheel torch; do
  if ! "$py" -c "import $mod" 2>/dev/null; then
    echo "install_pip: skipped: $py cannot import $mod (Debian: python3-pip, python3-setuptools," \
      "python3-wheel, python3-torch)"
    exit 77
  fi
done
work="$build/tests/install/pip"  # fixed paths: the CMake tree is reused and ccache hits
rm -rf "$work/venv" "$work/run"
mkdir -p "$work"
"$py" -m venv --system-site-packages --without-pip "$work/venv"
vpy="$work/venv/bin/python"
export CKPT_PIP_CMAKE_DIR="$work/cmake" PIP_NO_INDEX=1 PIP_DISABLE_PIP_VERSION_CHECK=1
unset PYTHONPATH
"$vpy" -m pip install -q --no-build-isolation --no-deps "$src/python"
cd "$work"
"$vpy" - <<'PY'
import os, sys
import torch
import ckpt

where = os.path.realpath(ckpt.__file__)
assert where.startswith(os.path.realpath(sys.prefix)), f"ckpt imported from {where}, not the venv"
torch.manual_seed(0)
model = torch.nn.Linear(4, 3)
opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
for _ in range(3):
    opt.zero_grad()
    model(torch.randn(5, 4)).pow(2).mean().backward()
    opt.step()
with ckpt.Checkpointer("run") as ck:
    ck.track(model=model, optimizer=opt)
    ck.save(3)
fresh = torch.nn.Linear(4, 3)
fresh_opt = torch.optim.AdamW(fresh.parameters(), lr=1e-2)
with ckpt.Checkpointer("run") as ck:
    ck.track(model=fresh, optimizer=fresh_opt)
    rep = ck.restore_latest()
assert rep.restored and rep.step == 3, rep
for a, b in zip(model.parameters(), fresh.parameters()):
    assert torch.equal(a, b)
sa, sb = opt.state_dict()["state"], fresh_opt.state_dict()["state"]
for k in sa:
    assert torch.equal(sa[k]["exp_avg_sq"], sb[k]["exp_avg_sq"])
print(f"install_pip ok: ckpt {ckpt.__version__} from {where}, torch {torch.__version__}, "
      f"restored {rep.components}")
PY
