#!/usr/bin/env bash
# Configures and builds ckpt in build/ (or $CKPT_BUILD_DIR). Idempotent: a second run only
# rebuilds what changed. $CKPT_CORE_TESTS (below) picks whether the core's tests are built here.
# Extra arguments are passed to `cmake --build` (e.g. --target ckpt).
set -euo pipefail
cd "$(dirname "$0")/.."
build="${CKPT_BUILD_DIR:-build}"
# ccache keys on paths relative to the checkout, so a fresh clone (CI) reuses earlier objects.
export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$PWD}"
if [[ ! -f "$build/CMakeCache.txt" ]]; then
  cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DCKPT_SKIP_DIRS="" >/dev/null
fi
# CKPT_CORE_TESTS=ON|OFF: whether this tree builds the tests that need no libtorch, Python or CUDA
# (CMakeLists.txt; scripts/test.sh sets OFF: the sanitized tree runs them). Unset: as configured.
if [[ -n "${CKPT_CORE_TESTS:-}" ]] &&
  ! grep -qx "CKPT_CORE_TESTS:BOOL=$CKPT_CORE_TESTS" "$build/CMakeCache.txt"; then
  cmake "$build" -DCKPT_CORE_TESTS="$CKPT_CORE_TESTS" >/dev/null
fi
jobs="${CKPT_JOBS:-2}"
echo "build: cmake --build $build -j$jobs $*" >&2
cmake --build "$build" -j"$jobs" "$@"
