#!/usr/bin/env python3
"""Runs clang-tidy (the checks in .clang-tidy) over every library, CLI and tool source of a build
tree's compile_commands.json; tests are left out. scripts/test-sanitized.sh runs it on the
sanitized tree (clang, no libtorch, CUDA or Python translation units).

A translation unit that passed is remembered by the SHA-256 of its compile command and of every
file its compile read, by name and content (from the compiler's depfile beside an up-to-date
object; without one, of its preprocessed text; the checkout's path taken out), .clang-tidy and the
clang-tidy version (in $CKPT_TIDY_CACHE, default ~/.cache/ckpt-tidy), so a second run checks only
what changed. Exit status: 0 clean, 1 a finding (each printed as clang-tidy prints it), 2 a setup
problem (no tree, no clang-tidy).

  scripts/tidy.py BUILD_DIR [-j N] [--no-cache] [--root DIR] [FILE_SUBSTRING...]
"""
import argparse
import concurrent.futures
import hashlib
import json
import os
import shlex
import shutil
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # --root overrides
SKIP_PARTS = ("/tests/", "/build", "/_deps/")


def sources(build, only):
    path = os.path.join(build, "compile_commands.json")
    try:
        with open(path) as f:
            entries = json.load(f)
    except (OSError, ValueError) as e:
        sys.exit(f"tidy: {path}: {e} (configure the tree first)")
    out = []
    for e in entries:
        rel = os.path.relpath(os.path.abspath(os.path.join(e["directory"], e["file"])), ROOT)
        if rel.startswith("..") or any(p in "/" + rel for p in SKIP_PARTS):
            continue
        if only and not any(s in rel for s in only):
            continue
        out.append((rel, e))
    return out


def preprocess_command(entry):
    args = entry.get("arguments") or shlex.split(entry["command"])
    pp, skip = [], False
    for a in args:
        if skip:
            skip = False
            continue
        if a == "-o":
            skip = True
            continue
        if a == "-c" or a.startswith("-o"):
            continue
        pp.append(a)
    return pp + ["-E", "-P", "-o", "-"]


def object_of(entry):
    args = entry.get("arguments") or shlex.split(entry["command"])
    for i, a in enumerate(args):
        if a == "-o" and i + 1 < len(args):
            return os.path.join(entry["directory"], args[i + 1])
        if a.startswith("-o") and len(a) > 2:
            return os.path.join(entry["directory"], a[2:])
    return None


def depfile_inputs(entry):
    """The files the build's last compile of this TU read (the compiler's depfile next to the
    object, as CMake's Makefile generator leaves it), or None when there is none or the object is
    older than any of them (the build is not up to date: the list may be stale)."""
    obj = object_of(entry)
    if obj is None:
        return None
    try:
        with open(obj + ".d") as f:
            text = f.read()
        built = os.stat(obj).st_mtime_ns
    except OSError:
        return None
    text = text.replace("\\\n", " ")
    _, sep, deps = text.partition(": ")
    if not sep:
        return None
    paths = []
    for name in deps.split():
        path = os.path.normpath(os.path.join(entry["directory"], name))
        try:
            if os.stat(path).st_mtime_ns > built:
                return None
        except OSError:
            return None
        paths.append(path)
    return paths or None


def key_of(entry, salt):
    # Keyed without the checkout's path, so a fresh clone reuses what an earlier one checked.
    h = hashlib.sha256(salt)
    h.update(entry.get("command", " ".join(entry.get("arguments", []))).replace(ROOT, "@").encode())
    inputs = depfile_inputs(entry)
    if inputs is not None:
        # Every file the compile read, by name and content: the preprocessed text is a function
        # of them and the command, and reading them costs milliseconds instead of a preprocessor
        # run (about 0.5 s a TU).
        for path in inputs:
            h.update(b"\0" + path.replace(ROOT, "@").encode() + b"\0")
            with open(path, "rb") as f:
                h.update(hashlib.sha256(f.read()).digest())
        return "d" + h.hexdigest()
    pp = subprocess.run(preprocess_command(entry), cwd=entry["directory"], capture_output=True)
    if pp.returncode != 0:
        return None  # let clang-tidy report the compile error
    h.update(pp.stdout.replace(ROOT.encode(), b"@"))
    return h.hexdigest()


def check(rel, entry, build, cache, salt):
    key = key_of(entry, salt) if cache else None
    if key and os.path.exists(os.path.join(cache, key)):
        return rel, True, True, ""
    r = subprocess.run(["clang-tidy", "-p", build, "--quiet", os.path.join(ROOT, rel)],
                       cwd=ROOT, capture_output=True, text=True)
    ok = r.returncode == 0 and ": error:" not in r.stdout and ": warning:" not in r.stdout
    if ok and key:
        os.makedirs(cache, exist_ok=True)
        open(os.path.join(cache, key), "w").close()
    return rel, ok, False, r.stdout + (r.stderr if not ok else "")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("build")
    ap.add_argument("only", nargs="*", help="check only files whose path contains one of these")
    ap.add_argument("-j", type=int, default=int(os.environ.get("CKPT_JOBS", "2")))
    ap.add_argument("--no-cache", action="store_true")
    ap.add_argument("--root", help="the source tree (default: the one holding this script)")
    a = ap.parse_args()
    global ROOT
    if a.root:
        ROOT = os.path.abspath(a.root)
    if not shutil.which("clang-tidy"):
        print("tidy: clang-tidy not found (scripts/install-deps.sh --test installs it)",
              file=sys.stderr)
        return 2
    build = os.path.abspath(a.build)
    todo = sources(build, a.only)
    if not todo:
        print(f"tidy: no sources in {build}/compile_commands.json", file=sys.stderr)
        return 2
    version = subprocess.run(["clang-tidy", "--version"], capture_output=True).stdout
    with open(os.path.join(ROOT, ".clang-tidy"), "rb") as f:
        salt = version + f.read()
    cache = None if a.no_cache else os.environ.get(
        "CKPT_TIDY_CACHE", os.path.join(os.path.expanduser("~"), ".cache", "ckpt-tidy"))
    t0, bad, cached = time.time(), [], 0
    with concurrent.futures.ThreadPoolExecutor(max(1, a.j)) as pool:
        jobs = [pool.submit(check, rel, e, build, cache, salt) for rel, e in todo]
        for n, job in enumerate(concurrent.futures.as_completed(jobs), 1):
            rel, ok, hit, text = job.result()
            cached += hit
            if not ok:
                bad.append(rel)
                sys.stdout.write(text)
            if n % 20 == 0 or n == len(jobs):
                print(f"tidy: {n}/{len(jobs)} checked ({cached} unchanged since a clean run), "
                      f"{time.time() - t0:.0f} s", file=sys.stderr)
    if bad:
        print(f"tidy: {len(bad)} file(s) with findings: {' '.join(sorted(bad))}", file=sys.stderr)
        return 1
    print(f"tidy: {len(todo)} files clean", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
