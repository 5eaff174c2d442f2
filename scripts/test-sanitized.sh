#!/usr/bin/env bash
# The whole Catch2 suite and the Python tests under AddressSanitizer + UndefinedBehaviorSanitizer
# (CKPT_SANITIZE=ON): every library, tool and test compiled with -fsanitize=address,undefined,
# UBSan reports fatal, LSan with tests/lsan.supp. Builds in build-asan/ (or $CKPT_ASAN_BUILD_DIR),
# idempotent like scripts/test.sh. .ci/run runs it after scripts/test.sh; a cold build is about
# 44 CPU-minutes (README.md "Reliability and safety, measured").
# python_tests runs the ASan-built extension in python3 with libasan and libstdc++ preloaded and
# leak checks off there (CPython keeps its memory until exit): see python/CMakeLists.txt.
# Left out: format_check (no code runs; scripts/test.sh checks it) and the install/cpack entries
# (they repackage and reinstall the build: nothing of ours runs that the suite does not cover).
# Extra arguments go to ctest (e.g. -R test_store).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh --test
export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$PWD}"
build="${CKPT_ASAN_BUILD_DIR:-build-asan}"
if [[ ! -f "$build/CMakeCache.txt" ]]; then
  # -O1 -g1 (ASan's recommended level; line tables are enough for its stack traces) keeps the
  # cold compile short; bench/ holds no tests, so it is not built here.
  cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCKPT_SANITIZE=ON \
    -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG" \
    -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG" -DCKPT_SKIP_DIRS=bench >/dev/null
fi
cmake --build "$build" -j"${CKPT_JOBS:-2}"
# detect_leaks stays on (LSAN_OPTIONS per test, from CMake); abort so ctest sees every report.
export ASAN_OPTIONS="${ASAN_OPTIONS:-abort_on_error=1:detect_stack_use_after_return=0}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
(cd "$build" && ctest --output-on-failure -j2 --timeout 1800 -E '^(format_check|install_)' "$@")
