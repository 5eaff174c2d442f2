#!/usr/bin/env bash
# The whole test suite: installs what is missing, builds everything, runs every Catch2 test
# through ctest, then each fuzzer briefly. README's test command; .ci/run calls it.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh --test
# ccache keys on paths relative to the checkout (here and in the fuzz builds), so a fresh clone
# (CI) reuses earlier objects.
export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$PWD}"
scripts/build.sh
build="${CKPT_BUILD_DIR:-build}"
(cd "$build" && ctest --output-on-failure -j2 --timeout 1200)
# Every fuzz target briefly (libFuzzer + ASan/UBSan, one shared build-fuzz/ tree).
for runner in verify/fuzz/run_fuzzers.sh analytics/fuzz/run_fuzzers.sh profile/fuzz/run_fuzzer.sh; do
  if [[ -x "$runner" ]]; then
    "$runner" "${CKPT_FUZZ_SECONDS:-15}"
  fi
done
