#!/usr/bin/env bash
# Builds the libFuzzer targets of analytics/ in the sanitized tree (clang, ASan + UBSan), as
# verify/fuzz/run_fuzzers.sh does, and runs each for N seconds (default 10; $CKPT_FUZZ_JOBS at a
# time, scripts/fuzz-pool.sh) from a corpus seeded with fixtures/analytics/ (event files, CSV,
# JSONL, trainer_state, MLflow metrics, run specs) and fixtures/fuzz/. A crash leaves crash-*
# files in the corpus folder: copy them into fixtures/fuzz/ and fix the reader.
#   analytics/fuzz/run_fuzzers.sh [SECONDS] [BUILD_DIR]
set -eu
SECONDS_EACH=${1:-10}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
# The sanitized tree (scripts/sanitized-tree.sh): the fuzz targets link the objects the sanitized
# tests ran; configured here if scripts/test-sanitized.sh has not done it yet.
BUILD=$("$ROOT/scripts/sanitized-tree.sh" "${2:-${CKPT_ASAN_BUILD_DIR:-$ROOT/build-asan}}")
cmake --build "$BUILD" --target fuzz_tfevents fuzz_lr_text fuzz_journal fuzz_run_spec fuzz_loader_state -j2
seed() {  # seed CORPUS FILE...: copies the seed files (the first byte picks lr_text's reader)
  corpus=$1
  shift
  for f in "$@"; do
    [ -f "$f" ] && cp -f "$f" "$corpus/$(echo "$f" | tr '/' '_')" 2>/dev/null || true
  done
}
. "$ROOT/scripts/fuzz-pool.sh"
FIX="$ROOT/fixtures/analytics"
for t in tfevents lr_text journal run_spec loader_state; do
  corpus="$BUILD/corpus_analytics_$t"
  mkdir -p "$corpus"
  seed "$corpus" "$ROOT"/fixtures/fuzz/*
  case $t in
    tfevents) seed "$corpus" $(find "$FIX/logs" -name 'events.out.tfevents*') ;;
    lr_text)
      for f in "$FIX"/*.csv "$FIX"/trainer_state_*.json "$FIX"/logs/lightning/csv/version_0/metrics.csv \
               $(find "$FIX/logs/mlruns" -path '*metrics*' -type f); do
        for k in 0 1 2 3; do
          [ -f "$f" ] && { printf "\\$(printf '%03o' $k)"; cat "$f"; } > "$corpus/seed$k-$(basename "$f")"
        done
      done ;;
    journal) seed "$corpus" $(find "$ROOT/fixtures" -name 'journal*.jsonl') ;;
    run_spec) seed "$corpus" "$FIX"/cov_*.json ;;
    loader_state) seed "$corpus" $(find "$ROOT/fixtures/lightning_coverage" -name metrics.csv) ;;
  esac
  fuzz_run "fuzz_$t for ${SECONDS_EACH}s" "$corpus" "$BUILD/analytics/fuzz/fuzz_$t" \
    -max_total_time="$SECONDS_EACH" -max_len=65536 -rss_limit_mb=2048 -timeout=10 \
    -print_final_stats=1 "$corpus"
done
fuzz_finish
