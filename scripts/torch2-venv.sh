#!/usr/bin/env bash
# Makes the torch 2.x venv the sharded-state tests (ctest python_shard, python/tests/test_shard*.py)
# and bench/shard_bench.py run with: PyPI torch (CPU use, gloo), numpy and safetensors, for the
# interpreter the ckpt extension is built for (/usr/bin/python3, CPython 3.11); and timm, whose
# optimizers and schedulers the knowledge property test produces (ctest
# audit_knowledge_property_torch2; timm pulls torchvision: about 12 s and 45 MB more).
#   scripts/torch2-venv.sh [VENV]      (default: build/python/torch2-venv, or $CKPT_BUILD_DIR's)
# Idempotent: a venv that already has the pinned torch, numpy and safetensors is left as it is;
# one lacking any gets it installed (nothing is removed). Without PyPI it prints
# one line ("torch2-venv: skip: ...") and exits 0; the tests then skip in one line.
set -euo pipefail
cd "$(dirname "$0")/.."
build="${CKPT_BUILD_DIR:-build}"
venv="${1:-$build/python/torch2-venv}"
torch_version="${CKPT_TORCH2_VERSION:-2.15.0}"
timm_version=1.0.15
base=/usr/bin/python3
[[ -x "$base" ]] || base="$(command -v python3)"
py="$venv/bin/python"
have() {
  "$py" -c "import sys, torch, numpy, safetensors, timm
sys.exit(0 if torch.__version__.split('+')[0] == '$torch_version' and
         timm.__version__ == '$timm_version' else 1)" 2>/dev/null
}
if [[ -x "$py" ]] && have; then
  echo "torch2-venv: $venv has torch $torch_version and timm $timm_version"
  exit 0
fi
index="${PIP_INDEX_URL:-https://pypi.org/simple/}"
if ! "$base" - "$index" <<'PY' 2>/dev/null; then
import sys, urllib.request
urllib.request.urlopen(sys.argv[1].rstrip("/") + "/pip/", timeout=10)
PY
  echo "torch2-venv: skip: package index $index unreachable (no torch $torch_version venv)"
  exit 0
fi
# Never removes anything: an existing venv lacking a package gets it installed.
[[ -x "$py" ]] || "$base" -m venv "$venv"
"$py" -m pip install -q "torch==$torch_version" numpy safetensors "timm==$timm_version"
have || { echo "torch2-venv: $venv: torch $torch_version or timm $timm_version did not install" >&2; exit 1; }
echo "torch2-venv: made $venv with torch $torch_version and timm $timm_version"
