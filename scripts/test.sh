#!/usr/bin/env bash
# The whole test suite: installs what is missing, builds everything, runs every Catch2 test
# through ctest, then each fuzzer briefly. README's test command; .ci/run calls it.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh --test
scripts/build.sh
build="${CKPT_BUILD_DIR:-build}"
(cd "$build" && ctest --output-on-failure -j2 --timeout 1200)
if [[ -x verify/fuzz/run_fuzzers.sh ]]; then
  verify/fuzz/run_fuzzers.sh "${CKPT_FUZZ_SECONDS:-20}"
fi
if [[ -x profile/fuzz/run_fuzzer.sh ]]; then
  profile/fuzz/run_fuzzer.sh "${CKPT_FUZZ_SECONDS:-20}"
fi
