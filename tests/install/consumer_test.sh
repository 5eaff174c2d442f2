#!/usr/bin/env bash
# ctest install_consumer: installs this build tree into a temporary prefix (cmake --install, the
# build's own compiled libraries), configures and builds tests/install/consumer against it with
# find_package(ckpt CONFIG REQUIRED), runs its programs, and checks their checkpoints with the
# installed `ckpt verify`. Usage: consumer_test.sh BUILD_DIR SOURCE_DIR WITH_TORCH(ON|OFF)
set -euo pipefail
build="$1" src="$2" with_torch="$3"
# A fixed folder in the build tree (not mktemp): the same paths each run, so ccache reuses the
# consumer's objects.
tmp="$build/tests/install/work"
rm -rf "$tmp"
mkdir -p "$tmp"
trap 'rm -rf "$tmp"' EXIT
cmake --install "$build" --prefix "$tmp/prefix" >/dev/null
for f in include/ckpt/store/rank_io.h lib/libckpt_store.a lib/cmake/ckpt/ckptConfig.cmake bin/ckpt; do
  [[ -e "$tmp/prefix/$f" ]] || { echo "not installed: $f" >&2; exit 1; }
done
launcher=()
if command -v ccache >/dev/null; then launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache); fi
# Only the install prefix: the consumer must not see the source tree.
cmake -S "$src/tests/install/consumer" -B "$tmp/consumer" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$tmp/prefix" -DCONSUMER_WITH_TORCH="$with_torch" "${launcher[@]}" >/dev/null
cmake --build "$tmp/consumer" -j2 >/dev/null
"$tmp/consumer/core_main" "$tmp/run-core"
"$tmp/prefix/bin/ckpt" verify "$tmp/run-core"
if [[ "$with_torch" == ON ]]; then
  "$tmp/consumer/torch_main" "$tmp/run-torch"
  "$tmp/prefix/bin/ckpt" verify "$tmp/run-torch"
fi
