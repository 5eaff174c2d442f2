#!/usr/bin/env bash
# Configures the sanitized tree (build-asan/, or $1) if it is not configured yet, and prints its
# path. One tree for the sanitized tests and the fuzzers: clang with ASan + UBSan and libFuzzer's
# coverage instrumentation (-fsanitize=fuzzer-no-link) on every object, so each fuzz target links
# the very objects the sanitized tests ran. -O1 -g1 (ASan's recommended level; line tables are
# enough for its stack traces). It holds what parses untrusted bytes and the store: the core,
# verify/, analytics/, resume/, profile/, report/ and cli/ with their tests; no libtorch, CUDA,
# Python extension, bench/ or examples/ (the normal build tests those).
#   scripts/sanitized-tree.sh [BUILD_DIR]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-${CKPT_ASAN_BUILD_DIR:-$root/build-asan}}
# A tree configured by an older script (gcc, no fuzz targets) is configured again from scratch.
if [[ -f "$build/CMakeCache.txt" ]] && ! grep -q '^CKPT_FUZZ:BOOL=ON' "$build/CMakeCache.txt"; then
  rm -rf "$build/CMakeCache.txt" "$build/CMakeFiles"
fi
if [[ ! -f "$build/CMakeCache.txt" ]]; then
  cov=-fsanitize=fuzzer-no-link
  opt="-O1 -g1 -DNDEBUG"
  cmake -S "$root" -B "$build" -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCKPT_SANITIZE=ON -DCKPT_FUZZ=ON \
    -DCMAKE_C_FLAGS="$cov" -DCMAKE_CXX_FLAGS="$cov" \
    -DCMAKE_C_FLAGS_RELWITHDEBINFO="$opt" -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="$opt" \
    -DCKPT_WITH_TORCH=OFF -DCKPT_WITH_CUDA=OFF -DCKPT_WITH_PYTHON=OFF \
    -DCKPT_SKIP_DIRS="bench;examples" >/dev/null
fi
cd "$build" && pwd  # absolute: the fuzz runners run from their corpus folders
