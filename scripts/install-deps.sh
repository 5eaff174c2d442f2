#!/usr/bin/env bash
# Installs what ckpt needs from Debian's packages, only what is missing. Idempotent; quick when all
# is there. Usage: scripts/install-deps.sh [--test]   (--test adds what the test suite needs)
set -euo pipefail
pkgs=(cmake g++ make ccache pkg-config zlib1g-dev libgloo-dev libtorch-dev libhdf5-dev hdf5-tools libxxhash-dev
      libcli11-dev catch2 nlohmann-json3-dev libroaring-dev libsimdjson-dev
      libcurl4-openssl-dev libssl-dev
      python3-torch python3-h5py python3-numpy python3-dev pybind11-dev)
if [[ "${1:-}" == "--test" ]]; then
  pkgs+=(clang clang-format clang-tidy libclang-rt-14-dev chromium strace util-linux python3-pytest
        python3-mypy python3-pip python3-setuptools python3-wheel python3-venv)
fi
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "install-deps: installing ${missing[*]}" >&2
  SUDO=""; [[ $(id -u) -ne 0 ]] && SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
