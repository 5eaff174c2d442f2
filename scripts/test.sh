#!/usr/bin/env bash
# The whole test suite, README's test command (.ci/run calls it): installs what is missing, builds
# build/ and runs there, through ctest, what needs libtorch, Python or CUDA (the Python tests, the
# libtorch adapter's, packaging), then the sanitized part (scripts/test-sanitized.sh: every other
# Catch2 test, the core's and the CLI's, under ASan + UBSan, clang-tidy, then each fuzzer
# briefly). Idempotent; quick when everything is built. Prints each phase's time at the end,
# failed or not. CKPT_SKIP_SANITIZED=1 builds and runs every test in build/ and stops there.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/phases.sh
# ccache keys on paths relative to the checkout (here and in the sanitized tree), so a fresh clone
# (CI) reuses earlier objects.
export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$PWD}"
build="${CKPT_BUILD_DIR:-build}"
phase "install dependencies" scripts/install-deps.sh --test
# The tests that need no libtorch, Python or CUDA run once, in the sanitized tree (ASan + UBSan:
# more checks than here); this tree builds and runs the rest. CKPT_SKIP_SANITIZED=1 runs them here.
if [[ "${CKPT_SKIP_SANITIZED:-0}" == 1 ]]; then
  export CKPT_CORE_TESTS=ON
else
  export CKPT_CORE_TESTS=OFF
fi
# The torch 2.x venv ctest python_shard runs ranks with (one line and a skip without PyPI) is made
# while the build compiles: it is mostly download and unpacking. Its phase is the wait after.
venv_log=$(mktemp)
scripts/torch2-venv.sh >"$venv_log" 2>&1 &
venv_pid=$!
torch2_venv() {
  local rc=0
  wait "$venv_pid" || rc=$?
  cat "$venv_log"
  rm -f "$venv_log"
  return "$rc"
}
if ! phase "build" scripts/build.sh; then
  kill "$venv_pid" 2>/dev/null || true
  exit 1
fi
phase "torch2 venv (during build)" torch2_venv
phase "tests" bash -c "cd '$build' && ctest --output-on-failure -j2 --timeout 1200"
if [[ "${CKPT_SKIP_SANITIZED:-0}" != 1 ]]; then
  scripts/test-sanitized.sh
fi
