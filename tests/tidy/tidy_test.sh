#!/usr/bin/env bash
# ctest tidy_self_check: runs scripts/tidy.py on a throwaway tree holding the repo's .clang-tidy
# and one source file, first with planted findings (use after move, a copied by-value parameter,
# a misleading container-size test), which must fail naming each check, then fixed, which must
# pass; the second clean run must come from the cache. Exits 77 (skipped) when clang-tidy is
# missing outside CI. Usage: tidy_test.sh SOURCE_DIR
set -euo pipefail
src=$1
if ! command -v clang-tidy >/dev/null; then
  [[ "${CI:-}" == true ]] && { echo "tidy_self_check: clang-tidy missing in CI"; exit 1; }
  echo "tidy_self_check: skipped: no clang-tidy (Debian: clang-tidy)"
  exit 77
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/root/ckpt" "$work/build"
cp "$src/.clang-tidy" "$work/root/"
cat >"$work/root/ckpt/planted.cc" <<'CC'
#include <string>
#include <utility>
#include <vector>
size_t use(std::vector<std::string> v) { return v.size(); }
size_t planted(std::vector<std::string> words) {
  std::vector<std::string> moved = std::move(words);
  if (words.size() == 0) return moved.size();
  return use(moved);
}
CC
cat >"$work/build/compile_commands.json" <<JSON
[{"directory": "$work/build", "file": "$work/root/ckpt/planted.cc",
  "command": "clang++ -std=c++17 -c $work/root/ckpt/planted.cc -o planted.o"}]
JSON
export CKPT_TIDY_CACHE="$work/cache"
set +e
out=$("$src/scripts/tidy.py" --root "$work/root" "$work/build" 2>&1)
rc=$?
set -e
echo "$out"
[[ $rc == 1 ]] || { echo "tidy_self_check: planted findings gave exit $rc, want 1"; exit 1; }
for check in bugprone-use-after-move performance-unnecessary-value-param \
    readability-container-size-empty; do
  grep -q "\[$check" <<<"$out" || { echo "tidy_self_check: $check not reported"; exit 1; }
done
cat >"$work/root/ckpt/planted.cc" <<'CC'
#include <string>
#include <utility>
#include <vector>
size_t use(const std::vector<std::string>& v) { return v.size(); }
size_t planted(std::vector<std::string> words) {
  std::vector<std::string> moved = std::move(words);
  if (moved.empty()) return 0;
  return use(moved);
}
CC
"$src/scripts/tidy.py" --root "$work/root" "$work/build"
out=$("$src/scripts/tidy.py" --root "$work/root" "$work/build" 2>&1)
grep -q "(1 unchanged since a clean run)" <<<"$out" ||
  { echo "tidy_self_check: the second clean run was not served from the cache: $out"; exit 1; }
echo "tidy_self_check: ok"
