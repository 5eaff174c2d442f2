#!/usr/bin/env bash
# ctest install_deb: `cpack -G DEB` (the one command of docs/install.md) over this build tree, into
# a temporary folder; the .deb must hold the headers, the static libraries, the CMake package
# config and the `ckpt` executable under /usr. Usage: deb_test.sh BUILD_DIR
set -euo pipefail
build="$1"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cpack -G DEB --config "$build/CPackConfig.cmake" -B "$tmp" >"$tmp/cpack.log" 2>&1 ||
  { cat "$tmp/cpack.log" >&2; exit 1; }
deb=$(ls "$tmp"/*.deb)
echo "$(basename "$deb"): $(stat -c %s "$deb") bytes"
if ! command -v dpkg-deb >/dev/null; then
  echo "dpkg-deb not found: the package was built but its contents are not listed" >&2
  exit 0
fi
dpkg-deb -c "$deb" | awk '{print $6}' >"$tmp/files"
for f in ./usr/include/ckpt/store/rank_io.h ./usr/lib/libckpt_store.a \
  ./usr/lib/cmake/ckpt/ckptConfig.cmake ./usr/lib/cmake/ckpt/ckptTargets.cmake ./usr/bin/ckpt; do
  grep -qxF "$f" "$tmp/files" || { echo "$deb lacks $f" >&2; exit 1; }
done
dpkg-deb -f "$deb" Package Version Depends
