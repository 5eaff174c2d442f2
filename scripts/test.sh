#!/usr/bin/env bash
# The whole test suite, README's test command (.ci/run calls it): installs what is missing, builds
# build/ and runs there, through ctest, what needs libtorch, Python or CUDA (the Python tests, the
# libtorch adapter's, packaging), then the sanitized part (scripts/test-sanitized.sh: every other
# Catch2 test, the core's and the CLI's, under ASan + UBSan, clang-tidy, then each fuzzer
# briefly; the sanitized tree compiles during build/'s tests). Idempotent; quick when everything
# is built. Prints each phase's time at the end, failed or not. CKPT_SKIP_SANITIZED=1 builds and
# runs every test in build/ and stops there.
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
sanitized=1
if [[ "${CKPT_SKIP_SANITIZED:-0}" == 1 ]]; then sanitized=0; fi
if ((sanitized)); then export CKPT_CORE_TESTS=OFF; else export CKPT_CORE_TESTS=ON; fi
# The venvs the Python tests run with are made while the build compiles (mostly download and
# unpacking): the torch 2.x one for python_shard (scripts/torch2-venv.sh; one line and a skip
# without PyPI) and the transformers/Lightning/Accelerate one for python_integrations
# (python/tests/integrations/fw_venv.py). Their phase is the wait after the build.
py=/usr/bin/python3
[[ -x "$py" ]] || py=python3
bg_pids=() bg_logs=()
during_build() {
  local log
  log=$(mktemp)
  "$@" >"$log" 2>&1 &
  bg_pids+=($!) bg_logs+=("$log")
}
after_build() {
  local rc=0 i
  for i in "${!bg_pids[@]}"; do
    wait "${bg_pids[$i]}" || rc=1
    cat "${bg_logs[$i]}"
    rm -f "${bg_logs[$i]}"
  done
  return "$rc"
}
mkdir -p "$build/python"
during_build scripts/torch2-venv.sh
during_build "$py" python/tests/integrations/fw_venv.py "$build/python/integrations-venv"
if ! phase "build" scripts/build.sh; then
  kill "${bg_pids[@]}" 2>/dev/null || true
  exit 1
fi
phase "venvs (during build)" after_build
# The sanitized tree compiles while build/'s tests run: those leave a core idle much of the time
# (Python start-up, gloo rendezvous, the S3 server, pip), and the compile runs at the lowest
# priority, so the tests keep the CPU they use. Its phase is the wait after the tests;
# test-sanitized.sh then finds it built.
san_pid=""
if ((sanitized)); then
  san_tree=$(scripts/sanitized-tree.sh)
  san_log=$(mktemp)
  nice -n 19 cmake --build "$san_tree" -j"${CKPT_JOBS:-2}" >"$san_log" 2>&1 &
  san_pid=$!
fi
if ! phase "tests" bash -c "cd '$build' && ctest --output-on-failure -j2 --timeout 1200"; then
  [[ -z "$san_pid" ]] || { kill "$san_pid" 2>/dev/null || true; wait "$san_pid" || true; }
  exit 1
fi
if ((sanitized)); then
  if ! phase "sanitized build (during tests)" wait "$san_pid"; then
    cat "$san_log"
    exit 1
  fi
  rm -f "$san_log"
  scripts/test-sanitized.sh
fi
