#!/usr/bin/env bash
# Real-process crash harness: SIGKILL ckpt-train-demo at chosen system calls during a run that
# saves (strace -e inject=SYSCALL:signal=KILL:when=N), and at random moments, then resume it
# without strace and check that it ends bit-identical (final_params_xxh3) to a run that was never
# killed, and that `ckpt verify` passes on the run directory.
#
#   scripts/crash_harness.sh [BUILD_DIR] [MAX_POINTS_PER_SYSCALL (8)] [RANDOM_KILLS (10)] [FLAGS]
#
# FLAGS are added to every demo command line: `--async-save` runs the same kills against
# non-blocking saves (strace -f follows the background thread; a kill takes the whole process).
# FLAGS `--resave` runs the re-save of a committed step instead: a finished run of
# examples/python/train.py (Python, BUILD_DIR/python, torch) is relaunched — which restores its
# last step and saves it again — and killed at each chosen call of that relaunch (`renameat2` is
# the atomic exchange of docs/format.md §2, "Re-saving a step"); the next launch must end with
# the parameters of the run never killed, and `ckpt verify` pass. PYTHON names the interpreter
# (default /usr/bin/python3).
#
# Prints one line per kill and a summary: kills tried, killed (the point was reached), resumed
# bit-exact, failures. Exit 0 when every kill resumed bit-exact. Needs strace. CI runs it with a
# few points through tests/train/robust_demo_test.cc ("the crash harness ...").
set -u
build=${1:-build}
max_points=${2:-8}
random_kills=${3:-10}
flags=${4:-}
here=$(cd "$(dirname "$0")/.." && pwd)
demo="$build/examples/ckpt-train-demo"
ckpt="$build/cli/ckpt"
args="--steps 60 --save-every 10 --keep-last 2 $flags"
syscalls="rename fdatasync fsync pwrite64 write unlink rmdir mkdir openat ftruncate flock fallocate"
resave=0
if [ "$flags" = "--resave" ]; then
  resave=1
  py=${PYTHON:-/usr/bin/python3}
  train="$here/examples/python/train.py"
  args="--steps 20 --save-every 10 --workers 0"
  # The relaunch's own calls: Python's start-up makes thousands of write/openat, few of these.
  syscalls="rename renameat2 fdatasync fsync pwrite64 unlink rmdir"
  [ -f "$build/python/ckpt/__init__.py" ] || { echo "crash_harness: $build/python not built" >&2; exit 2; }
  "$py" -c "import torch" 2>/dev/null || { echo "crash_harness: $py has no torch" >&2; exit 2; }
else
  [ -x "$demo" ] || { echo "crash_harness: $demo not built" >&2; exit 2; }
fi
command -v strace >/dev/null || { echo "crash_harness: strace is not installed" >&2; exit 2; }
[ -x "$ckpt" ] || { echo "crash_harness: $ckpt not built" >&2; exit 2; }
work=$(mktemp -d /tmp/ckpt-crash-XXXXXX)
trap 'rm -rf "$work"' EXIT
# Private copies: a rebuild of BUILD_DIR while this runs must not turn into "exec failed".
mkdir "$work/bin" && cp "$ckpt" "$work/bin/" || exit 2
[ $resave -eq 1 ] || cp "$demo" "$work/bin/" || exit 2
[ $resave -eq 0 ] || cp -r "$build/python" "$work/python" || exit 2
demo="$work/bin/ckpt-train-demo"
ckpt="$work/bin/ckpt"

# One launch: the demo, or (re-save) train.py on a copy of the finished reference run, printing
# the digest line of its final parameters.
launch() {  # $1 = run dir, then the command prefix (strace ...) if any
  local dir=$1; shift
  if [ $resave -eq 0 ]; then
    "$@" "$demo" --run-dir "$dir" $args
    return
  fi
  [ -d "$dir" ] || cp -r "$work/finished" "$dir"
  PYTHONPATH="$work/python" "$@" "$py" "$train" --run-dir "$dir" $args \
    --params-out "$dir.params" || return
  echo "final_params_xxh3 $(cksum < "$dir.params" | tr ' ' -)"
}

digest() { sed -n 's/^final_params_xxh3 //p' | tail -1; }
if [ $resave -eq 1 ]; then
  PYTHONPATH="$work/python" "$py" "$train" --run-dir "$work/finished" $args >/dev/null 2>&1 ||
    { echo "crash_harness: the first run of train.py failed" >&2; exit 2; }
fi
ref=$(launch "$work/ref" | digest)
[ -n "$ref" ] || { echo "crash_harness: the reference run failed" >&2; exit 2; }
# How often each system call happens in one uninterrupted run (all threads).
launch "$work/count" strace -f -c -o "$work/counts" -e trace="$(echo $syscalls | tr ' ' ,)" \
  >/dev/null 2>&1

tried=0 killed=0 exact=0 failed=0
check() {  # $1 = label, $2 = run dir, $3 = exit status of the killed run
  tried=$((tried + 1))
  if [ "$3" -eq 0 ]; then echo "$1: not reached (the run finished)"; return; fi
  killed=$((killed + 1))
  local out rc got vrc
  out=$(launch "$2" 2>&1); rc=$?
  got=$(echo "$out" | digest)
  "$ckpt" verify "$2" >/dev/null 2>&1; vrc=$?
  if [ $rc -eq 0 ] && [ "$got" = "$ref" ] && [ $vrc -eq 0 ]; then
    exact=$((exact + 1)); echo "$1: killed, resumed bit-exact"
  else
    failed=$((failed + 1))
    echo "$1: FAILED (resume exit $rc, digest ${got:-none} vs $ref, verify exit $vrc)"
    echo "$out" | tail -3 | sed 's/^/    /'
  fi
}

for sc in $syscalls; do
  n=$(awk -v s="$sc" '$NF == s { print $4 }' "$work/counts")  # the "calls" column
  [ -z "$n" ] && n=0
  [ "$n" -eq 0 ] && { echo "$sc: not called"; continue; }
  step=$(( (n + max_points - 1) / max_points ))
  for ((k = 1; k <= n; k += step)); do
    dir="$work/$sc-$k"
    # Waited for inside a group whose stderr is /dev/null: bash's "Killed" notices go there.
    { launch "$dir" strace -f -o /dev/null -e inject="$sc":signal=KILL:when=$k \
        >/dev/null 2>&1 & wait $!; } 2>/dev/null
    check "$sc when=$k of $n" "$dir" $?
    rm -rf "$dir" "$dir.params"
  done
done
[ $resave -eq 1 ] && random_kills=0  # the relaunch is mostly Python's start-up

for ((i = 1; i <= random_kills; i++)); do
  dir="$work/random-$i"
  ms=$((300 + RANDOM % 2500))
  { timeout -s KILL "$(printf '%d.%03d' $((ms / 1000)) $((ms % 1000)))" \
      "$demo" --run-dir "$dir" $args >/dev/null 2>&1 & wait $!; } 2>/dev/null
  check "random kill after ${ms} ms" "$dir" $?
  rm -rf "$dir"
done

echo "kills tried: $tried, reached: $killed, resumed bit-exact: $exact, failed: $failed"
[ $failed -eq 0 ]
