#!/bin/sh
# Builds profile/'s libFuzzer target (the trace importer) in the sanitized tree (clang, ASan +
# UBSan) and runs it for N seconds (default 10) from a corpus seeded with the profile
# fixtures (inflated) and fixtures/fuzz/. A crash leaves crash-* files in the corpus folder: copy
# them into fixtures/fuzz/ and fix the importer.
#   profile/fuzz/run_fuzzer.sh [SECONDS] [BUILD_DIR]
set -eu
SECONDS_EACH=${1:-10}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
# The sanitized tree (scripts/sanitized-tree.sh): the fuzz targets link the objects the sanitized
# tests ran; configured here if scripts/test-sanitized.sh has not done it yet.
BUILD=$("$ROOT/scripts/sanitized-tree.sh" "${2:-${CKPT_ASAN_BUILD_DIR:-$ROOT/build-asan}}")
cmake --build "$BUILD" --target fuzz_trace_import -j2
corpus="$BUILD/corpus_trace_import"
mkdir -p "$corpus"
for f in "$ROOT"/fixtures/profile/*.json "$ROOT"/fixtures/fuzz/*; do
  [ -f "$f" ] && cp -f "$f" "$corpus/" 2>/dev/null || true
done
for f in "$ROOT"/fixtures/profile/ddp_*/*.json.gz; do
  [ -f "$f" ] && gzip -dc "$f" > "$corpus/$(basename "$(dirname "$f")")_$(basename "$f" .gz)" || true
done
echo "== fuzz_trace_import for ${SECONDS_EACH}s"
cd "$corpus" && "$BUILD/profile/fuzz/fuzz_trace_import" -max_total_time="$SECONDS_EACH" \
  -max_len=65536 -rss_limit_mb=2048 -timeout=10 -print_final_stats=1 "$corpus"
