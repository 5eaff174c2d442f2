# Sourced by the fuzz runners with more than one target (verify/fuzz/run_fuzzers.sh,
# analytics/fuzz/run_fuzzers.sh; profile/'s has one): runs their fuzzers $CKPT_FUZZ_JOBS at a time (default: the number
# of cores, at most 4), each on one core for its own -max_total_time, so the fuzzing each target
# gets is the same as one after another and the wall time is divided by the jobs. Each fuzzer's
# output goes to a log and is printed whole, in start order, when it ends.
#   fuzz_run NAME DIR COMMAND...  start one in DIR (waits first while $CKPT_FUZZ_JOBS run)
#   fuzz_finish                wait for the rest; returns 1 if any fuzzer failed
fuzz_jobs=${CKPT_FUZZ_JOBS:-$(nproc 2>/dev/null || echo 1)}
if ((fuzz_jobs > 4)); then fuzz_jobs=4; fi
if ((fuzz_jobs < 1)); then fuzz_jobs=1; fi
fuzz_pids=() fuzz_names=() fuzz_logs=() fuzz_status=0 fuzz_started=0
fuzz_log_dir=$(mktemp -d)

fuzz_drain_one() {  # the oldest running fuzzer: wait for it and print its log
  local pid=${fuzz_pids[0]} name=${fuzz_names[0]} log=${fuzz_logs[0]}
  fuzz_pids=("${fuzz_pids[@]:1}") fuzz_names=("${fuzz_names[@]:1}") fuzz_logs=("${fuzz_logs[@]:1}")
  local rc=0
  wait "$pid" || rc=$?
  echo "== $name"
  cat "$log"
  if ((rc != 0)); then
    echo "== $name FAILED (exit $rc)"
    fuzz_status=1
  fi
}

fuzz_run() {
  local name=$1 dir=$2
  shift 2
  while ((${#fuzz_pids[@]} >= fuzz_jobs)); do fuzz_drain_one; done
  fuzz_started=$((fuzz_started + 1))
  local log="$fuzz_log_dir/$fuzz_started-$name.log"
  (cd "$dir" && "$@") >"$log" 2>&1 &
  fuzz_pids+=($!) fuzz_names+=("$name") fuzz_logs+=("$log")
}

fuzz_finish() {
  while ((${#fuzz_pids[@]} > 0)); do fuzz_drain_one; done
  rm -rf "$fuzz_log_dir"
  return "$fuzz_status"
}
