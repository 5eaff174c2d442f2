#!/bin/sh
# `ckpt --version` (and so every command that does not use a device) starts without loading the
# CUDA runtime: the executable does not link libcudart (ldd lists every library the loader would
# map), and the loader maps none while it runs (LD_DEBUG=libs names every library it loads).
# Usage: no_cudart_test.sh PATH/TO/ckpt
set -u
ckpt="$1"
"$ckpt" --version >/dev/null || { echo "FAIL: $ckpt --version failed"; exit 1; }
if ldd "$ckpt" | grep -i cudart; then
  echo "FAIL: $ckpt links libcudart (ldd above)"
  exit 1
fi
if LD_DEBUG=libs "$ckpt" --version 2>&1 | grep -i "cudart"; then
  echo "FAIL: $ckpt --version loads libcudart (LD_DEBUG above)"
  exit 1
fi
echo "ok: $ckpt --version loads no libcudart"
