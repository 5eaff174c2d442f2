#!/usr/bin/env bash
# The GPU checks of the restore path in one script, for a machine with an NVIDIA GPU and the CUDA
# toolkit (under 5 minutes on a 16-core box, build included):
#   1. configure and build, without libtorch (the GPU restore path needs only the CUDA runtime):
#      test_resume and cuda_restore_bench;
#   2. run the [cuda] tests (device restore equals the saved bytes, a flipped byte is refused,
#      wrong destinations are refused, the pinned ring's reuse protocol); any failure fails the
#      script; a skip (no usable GPU) exits 3;
#   3. cuda_restore_bench: the pipeline (pread → pinned ring → cudaMemcpyAsync, hashed on the
#      host) against a pinned cudaMemcpy of the same size and a raw pread, warm and cold;
#   4. the peers on the same state: torch.load(map_location="cuda") and safetensors'
#      load_file(device="cuda") (bench/gpu_peers.py, with $PYTHON: a torch that sees the GPU);
#   5. with --with-torch: also builds against that Python's libtorch and runs test_torch "[cuda]"
#      (the CUDA generator of every device round trip) — slower, and only where that libtorch
#      links with this compiler;
#   6. with --with-python: builds the Python package for $PYTHON (needs pybind11 and that
#      Python's headers) and runs python/tests/test_cuda.py and test_in_place.py with it (CUDA
#      models and AdamW saved from pinned host copies, blocking and not, restored bit for bit).
# Needs what scripts/install-deps.sh installs, plus the CUDA toolkit (nvcc not required).
# Usage: bench/gpu_resume.sh [--with-torch] [--with-python] [BUILD_DIR]
#        env: MB (state size, 1024), PYTHON (default: python3), JOBS (default: nproc)
set -euo pipefail
cd "$(dirname "$0")/.."
with_torch=0
with_python=0
while [[ "${1:-}" == --with-* ]]; do
  case "$1" in
    --with-torch) with_torch=1 ;;
    --with-python) with_python=1 ;;
    *) echo "gpu_resume: unknown flag $1" >&2 && exit 64 ;;
  esac
  shift
done
build=${1:-build-gpu}
MB=${MB:-1024}
PYTHON=${PYTHON:-python3}
JOBS=${JOBS:-$(nproc)}
start=$(date +%s)
say() { printf '\n== %s (%ds)\n' "$*" $(($(date +%s) - start)); }

say "GPU"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader ||
  echo "gpu_resume: nvidia-smi failed (no driver?)"

say "build ($build, $JOBS jobs)"
torch_flags=(-DCKPT_WITH_TORCH=OFF)
if ((with_torch)); then
  prefix=$("$PYTHON" -c 'import torch; print(torch.utils.cmake_prefix_path)')
  torch_flags=(-DCKPT_WITH_TORCH=ON "-DCMAKE_PREFIX_PATH=$prefix")
fi
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DCKPT_WITH_CUDA=ON "${torch_flags[@]}" \
  -DCKPT_SKIP_DIRS="verify;analytics;profile;report;cli;examples;python" >/dev/null
targets=(test_resume cuda_restore_bench)
((with_torch)) && targets+=(test_torch)
cmake --build "$build" -j "$JOBS" --target "${targets[@]}" >/dev/null
if [[ ! -x "$build/bench/cuda_restore_bench" ]]; then
  echo "gpu_resume: CMake did not find the CUDA toolkit (no cuda_restore_bench); see its log" >&2
  exit 2
fi

say "[cuda] tests"
out=$("$build/tests/resume/test_resume" "[cuda]" 2>&1) || {
  echo "$out"
  exit 1
}
echo "$out" | tail -3
if grep -q "skipped: no CUDA device" <<<"$out"; then
  echo "gpu_resume: the [cuda] tests skipped: no usable GPU here" >&2
  exit 3
fi
if ((with_torch)); then
  "$build/tests/torch/test_torch" "[cuda]" | tail -3
fi

say "pipeline vs pinned cudaMemcpy vs raw read ($MB MB)"
bench_out=$("$build/bench/cuda_restore_bench" --mb "$MB" --tensor-mb 64 --reps 5 --cold-reps 2)
echo "$bench_out"
# MB/s → GB/s for the summary: "<name> <seconds> s <MB/s> MB/s" lines, per section.
awk '/^WARM|^COLD/ {sec=$1}
     /pinned H2D|DeviceRestorer|storage read/ {
       for (i = 1; i <= NF; ++i) if ($(i+1) == "MB/s") { printf "  %s %-44s %6.2f GB/s\n", sec, $0 ~ /Device/ ? "pipeline H2D (read+hash+copy)" : ($0 ~ /pinned/ ? "pinned cudaMemcpy" : "raw pread"), $i / 1000; break }
     }' <<<"$bench_out"

say "peers on the same state"
"$PYTHON" bench/gpu_peers.py --device cuda:0 --mb "$MB" --tensor-mb 64 --small 256 ||
  echo "gpu_resume: the peers failed (does $PYTHON have torch with CUDA?)"

if ((with_python)); then
  say "Python package on CUDA ($PYTHON)"
  cmake -S . -B "$build-py" -DCMAKE_BUILD_TYPE=Release -DCKPT_WITH_TORCH=OFF \
    "-DPython3_EXECUTABLE=$(command -v "$PYTHON")" \
    -DCKPT_SKIP_DIRS="verify;analytics;profile;report;cli;examples;bench" >/dev/null
  cmake --build "$build-py" -j "$JOBS" --target ckpt_python >/dev/null
  PYTHONPATH="$build-py/python" "$PYTHON" -m pytest -q -p no:cacheprovider -rs \
    python/tests/test_cuda.py python/tests/test_in_place.py
fi

say "done"
