#!/usr/bin/env bash
# The whole test suite, README's test command (.ci/run calls it): installs what is missing, builds
# everything, runs every Catch2 test and the Python tests through ctest, then the sanitized part
# (scripts/test-sanitized.sh: the untrusted-byte readers and the store under ASan + UBSan, then
# each fuzzer briefly). Idempotent; quick when everything is built. Prints each phase's time at
# the end, failed or not. CKPT_SKIP_SANITIZED=1 stops after the normal build's tests.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/phases.sh
# ccache keys on paths relative to the checkout (here and in the sanitized tree), so a fresh clone
# (CI) reuses earlier objects.
export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$PWD}"
build="${CKPT_BUILD_DIR:-build}"
phase "install dependencies" scripts/install-deps.sh --test
phase "build" scripts/build.sh
# The torch 2.x venv ctest python_shard runs ranks with (one line and a skip without PyPI).
phase "torch2 venv" scripts/torch2-venv.sh
phase "tests" bash -c "cd '$build' && ctest --output-on-failure -j2 --timeout 1200"
if [[ "${CKPT_SKIP_SANITIZED:-0}" != 1 ]]; then
  scripts/test-sanitized.sh
fi
