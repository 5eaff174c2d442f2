#!/usr/bin/env bash
# The demo, end to end: installs what is missing, builds, then
#   1. trains a run that never stops, and the same run preempted twice and crashed once,
#      resumed in fresh processes each time — and shows the two end bit-identical;
#   2. trains a careless run (scheduler and loader left out of its checkpoints), restarted three
#      times, and lets ckpt say what went wrong: audit, LR across restarts, dataset coverage;
#   3. trains with a starved input pipeline and lets the step profiler name the cause;
#   4. writes one HTML report per run;
#   5. trains examples/python/train.py (the Python package) with a restart, bit-identical, and
#      audits its checkpoint.
# Usage: scripts/demo.sh [OUT_DIR]   (default: demo-run/; it is recreated)
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh --target ckpt ckpt-train-demo ckpt_python
build="${CKPT_BUILD_DIR:-build}"
CKPT="$build/cli/ckpt"
DEMO="$build/examples/ckpt-train-demo"
OUT="${1:-demo-run}"
rm -rf "$OUT"
mkdir -p "$OUT"

section() { printf '\n\033[1m=== %s ===\033[0m\n' "$*"; }
# Runs a ckpt command whose exit status 2 means "findings" (not a failure of the demo).
findings() {
  local rc=0
  "$@" || rc=$?
  if [[ $rc -eq 2 ]]; then echo "(exit 2: findings)"; elif [[ $rc -ne 0 ]]; then exit $rc; fi
}
digest() { tail -n 1 | awk '{print $2}'; }

section "1. A run that never stops: 200 steps"
A=$("$DEMO" --run-dir "$OUT/straight" --steps 200 | tee "$OUT/straight.log" | digest)
echo "final_params_xxh3 $A"

section "2. The same run: preempted mid-epoch (60), at the epoch boundary (188), crashed at 195"
"$DEMO" --run-dir "$OUT/restarted" --steps 200 --stop-at 60 | grep -E "fresh|restored|stopped"
"$DEMO" --run-dir "$OUT/restarted" --steps 200 --stop-at 188 | grep -E "restored|stopped"
"$DEMO" --run-dir "$OUT/restarted" --steps 200 --crash-at 195 | grep -E "restored|crash" || true
B=$("$DEMO" --run-dir "$OUT/restarted" --steps 200 | tee "$OUT/restarted.log" | digest)
grep -E "restored" "$OUT/restarted.log"
echo "final_params_xxh3 $B"
if [[ "$A" == "$B" ]]; then
  echo "bit-identical to the run that never stopped: yes"
else
  echo "bit-identical to the run that never stopped: NO" >&2
  exit 1
fi

section "3. What a complete checkpoint holds (ckpt audit, ckpt verify)"
"$CKPT" audit "$OUT/restarted"
"$CKPT" verify "$OUT/restarted"

section "4. A careless run: scheduler and loader left out, restarted at 50, 100 and 150"
for stop in 50 100 150; do
  "$DEMO" --run-dir "$OUT/careless" --steps 200 --omit scheduler,loader --stop-at $stop |
    grep -E "fresh|restored|stopped|scheduler state"
done
C=$("$DEMO" --run-dir "$OUT/careless" --steps 200 --omit scheduler,loader | digest)
echo "final_params_xxh3 $C (the run that never stopped: $A)"
section "4a. ckpt audit of its latest checkpoint"
findings "$CKPT" audit "$OUT/careless"
section "4b. ckpt lr: the learning rate across its restarts"
findings "$CKPT" lr "$OUT/careless" --svg "$OUT/careless-lr.svg"
section "4c. ckpt coverage: what it really trained on"
findings "$CKPT" coverage "$OUT/careless" --svg "$OUT/careless-coverage.svg"
section "4d. The same two questions for the careful run"
findings "$CKPT" lr "$OUT/restarted" --svg "$OUT/restarted-lr.svg"
findings "$CKPT" coverage "$OUT/restarted" --svg "$OUT/restarted-coverage.svg"

section "5. A starved input pipeline: 80 steps with 8 ms of loader latency per step"
"$DEMO" --run-dir "$OUT/starved" --steps 80 --slow-loader 8 | tail -n 1
findings "$CKPT" profile analyze "$OUT"/starved/profile/*.jsonl --svg "$OUT/starved-profile.svg"

section "6. One HTML page per run"
for run in restarted careless starved; do
  findings "$CKPT" report "$OUT/$run" --html "$OUT/$run.html"
  echo "$OUT/$run.html"
done
section "7. The same in Python: examples/python/train.py (import ckpt), stopped at 57 and resumed"
# Debian's python3 with python3-torch; the package the build put in $build/python.
PY=(env PYTHONPATH="$build/python" /usr/bin/python3 examples/python/train.py)
"${PY[@]}" --run-dir "$OUT/python-straight" --params-out "$OUT/python-straight.bin" | tail -n 1
"${PY[@]}" --run-dir "$OUT/python" --stop-after 57
"${PY[@]}" --run-dir "$OUT/python" --params-out "$OUT/python.bin"
if cmp -s "$OUT/python-straight.bin" "$OUT/python.bin"; then
  echo "final parameters bit-identical to the run that never stopped: yes"
else
  echo "final parameters bit-identical to the run that never stopped: NO" >&2
  exit 1
fi
section "7a. ckpt audit of its checkpoint"
"$CKPT" audit "$OUT/python"
echo
echo "Charts and pages are in $OUT/ (open $OUT/careless.html in a browser)."
