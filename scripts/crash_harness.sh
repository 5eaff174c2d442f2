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
#
# Prints one line per kill and a summary: kills tried, killed (the point was reached), resumed
# bit-exact, failures. Exit 0 when every kill resumed bit-exact. Needs strace.
set -u
build=${1:-build}
max_points=${2:-8}
random_kills=${3:-10}
flags=${4:-}
demo="$build/examples/ckpt-train-demo"
ckpt="$build/cli/ckpt"
args="--steps 60 --save-every 10 --keep-last 2 $flags"
syscalls="rename fdatasync fsync pwrite64 write unlink rmdir mkdir openat ftruncate flock fallocate"
command -v strace >/dev/null || { echo "crash_harness: strace is not installed" >&2; exit 2; }
[ -x "$demo" ] || { echo "crash_harness: $demo not built" >&2; exit 2; }
work=$(mktemp -d /tmp/ckpt-crash-XXXXXX)
trap 'rm -rf "$work"' EXIT
# Private copies: a rebuild of BUILD_DIR while this runs must not turn into "exec failed".
mkdir "$work/bin" && cp "$demo" "$ckpt" "$work/bin/" || exit 2
demo="$work/bin/ckpt-train-demo"
ckpt="$work/bin/ckpt"

digest() { sed -n 's/^final_params_xxh3 //p' | tail -1; }
ref=$("$demo" --run-dir "$work/ref" $args | digest)
[ -n "$ref" ] || { echo "crash_harness: the reference run failed" >&2; exit 2; }
# How often each system call happens in one uninterrupted run (all threads).
strace -f -c -o "$work/counts" -e trace="$(echo $syscalls | tr ' ' ,)" \
  "$demo" --run-dir "$work/count" $args >/dev/null 2>&1

tried=0 killed=0 exact=0 failed=0
check() {  # $1 = label, $2 = run dir, $3 = exit status of the killed run
  tried=$((tried + 1))
  if [ "$3" -eq 0 ]; then echo "$1: not reached (the run finished)"; return; fi
  killed=$((killed + 1))
  local out rc got vrc
  out=$("$demo" --run-dir "$2" $args 2>&1); rc=$?
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
    { strace -f -o /dev/null -e inject="$sc":signal=KILL:when=$k \
        "$demo" --run-dir "$dir" $args >/dev/null 2>&1 & wait $!; } 2>/dev/null
    check "$sc when=$k of $n" "$dir" $?
    rm -rf "$dir"
  done
done

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
