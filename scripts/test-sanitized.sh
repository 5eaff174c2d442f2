#!/usr/bin/env bash
# The sanitized part of the suite, in one tree (scripts/sanitized-tree.sh, build-asan/ or
# $CKPT_ASAN_BUILD_DIR): every Catch2 test that needs no libtorch, Python or CUDA (the core, the
# untrusted-byte readers, the store, resume, analytics, profile, the CLI), built with clang under
# AddressSanitizer + UndefinedBehaviorSanitizer (UBSan reports fatal, LSan with tests/lsan.supp),
# then clang-tidy over the sources it compiles (scripts/tidy.py, .clang-tidy), then every libFuzzer
# target briefly ($CKPT_FUZZ_JOBS at a time), linked from the same objects. scripts/test.sh runs
# it after build/'s tests, and these tests run only here (build/ is built without them:
# CKPT_CORE_TESTS=OFF); idempotent like it.
# Left out here (build/ tests them): libtorch, CUDA, the Python extension, packaging and
# format_check (no code of ours runs in it). Extra arguments go to ctest (e.g. -R test_store);
# the fuzzers run only without them.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/phases.sh
phase "install dependencies" scripts/install-deps.sh --test
export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$PWD}"
build=$(scripts/sanitized-tree.sh)
phase "sanitized build" cmake --build "$build" -j"${CKPT_JOBS:-2}"
# detect_leaks stays on (LSAN_OPTIONS per test, from CMake); abort so ctest sees every report.
export ASAN_OPTIONS="${ASAN_OPTIONS:-abort_on_error=1:detect_stack_use_after_return=0}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
phase "sanitized tests" bash -c "cd '$build' && ctest --output-on-failure -j2 --timeout 1800 \
  -E '^(format_check|install_)' $(printf '%q ' "$@")"
if (($# == 0)); then
  # .clang-tidy's checks over the sources this tree compiles (tests excluded); cached per TU.
  phase "clang-tidy" scripts/tidy.py "$build"
  for runner in verify/fuzz/run_fuzzers.sh analytics/fuzz/run_fuzzers.sh profile/fuzz/run_fuzzer.sh; do
    phase "fuzz ${runner%%/*}" "$runner" "${CKPT_FUZZ_SECONDS:-15}" "$build"
  done
fi
