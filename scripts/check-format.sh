#!/usr/bin/env bash
# Fails (exit 1) when a C++ source file does not match the checked-in .clang-format, listing the
# files (or when a Catch2 test name holds a character CMake splits on); `clang-format -i FILE` fixes one. Run by ctest (tests/CMakeLists.txt) and so by
# scripts/test.sh. Checks tracked and new (untracked, not ignored) files; fixtures/ is data.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v clang-format >/dev/null || { echo "check-format: clang-format not installed" >&2; exit 1; }
mapfile -t files < <(git ls-files --cached --others --exclude-standard -- '*.cc' '*.h' '*.cu' '*.cuh' |
  grep -v '^fixtures/' | while read -r f; do [[ -f "$f" ]] && echo "$f"; done)
bad=$(printf '%s\0' "${files[@]}" | xargs -0 clang-format --dry-run --Werror 2>&1 |
  grep -oE '^[^:]+:[0-9]+:[0-9]+: (warning|error)' | cut -d: -f1 | sort -u || true)
if [[ -n "$bad" ]]; then
  echo "check-format: these files do not match .clang-format (run clang-format -i on them):" >&2
  echo "$bad" >&2
  exit 1
fi
# A Catch2 test name with ';' (or '[') is split by CMake into filters that match nothing.
split=$(git grep -n -E 'TEST_CASE\("[^"]*[;[]' -- 'tests/*.cc' || true)
if [[ -n "$split" ]]; then
  echo "check-format: test names with ';' or '[' (CMake splits them; use ',' instead):" >&2
  echo "$split" >&2
  exit 1
fi
echo "check-format: ${#files[@]} files match .clang-format"
