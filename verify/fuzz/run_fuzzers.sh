#!/usr/bin/env bash
# Builds the libFuzzer targets of verify/ (and tests/shard's fuzz_box_index: the sharded
# checkpoint's INDEX, both versions) in the sanitized tree (clang, ASan + UBSan) and
# runs each for N seconds (default 10; $CKPT_FUZZ_JOBS at a time, scripts/fuzz-pool.sh) from a
# corpus seeded with fixtures/ and fixtures/fuzz/.
# A crash leaves crash-* files in the corpus folder: copy them into fixtures/fuzz/ (the unit test
# tests/verify/bad_input_test.cc replays every file there) and fix the reader.
#   verify/fuzz/run_fuzzers.sh [SECONDS] [BUILD_DIR]
set -eu
SECONDS_EACH=${1:-10}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
# The sanitized tree (scripts/sanitized-tree.sh): the fuzz targets link the objects the sanitized
# tests ran; configured here if scripts/test-sanitized.sh has not done it yet.
BUILD=$("$ROOT/scripts/sanitized-tree.sh" "${2:-${CKPT_ASAN_BUILD_DIR:-$ROOT/build-asan}}")
cmake --build "$BUILD" --target fuzz_pickle fuzz_zip fuzz_safetensors fuzz_scan fuzz_records \
  fuzz_box_index -j2
. "$ROOT/scripts/fuzz-pool.sh"
for t in pickle zip safetensors scan records box_index; do
  corpus="$BUILD/corpus_$t"
  mkdir -p "$corpus"
  target="$BUILD/verify/fuzz/fuzz_$t"
  if [ "$t" = box_index ]; then  # an INDEX of each version (fixtures/fuzz_seeds/index/)
    cp -f "$ROOT"/fixtures/fuzz_seeds/index/*.INDEX "$corpus/"
    fuzz_run "fuzz_$t for ${SECONDS_EACH}s" "$corpus" "$BUILD/tests/shard/fuzz_box_index" \
      -max_total_time="$SECONDS_EACH" -max_len=65536 -rss_limit_mb=2048 -timeout=10 \
      -print_final_stats=1 "$corpus"
    continue
  fi
  if [ "$t" = records ]; then  # the first byte picks the decoder (even: manifest, odd: commit)
    { printf '\000'; cat "$ROOT/fixtures/fuzz_seeds/records/manifest.json"; } > "$corpus/seed-manifest"
    { printf '\000'; cat "$ROOT/fixtures/fuzz_seeds/records/manifest_boxes.json"; } \
      > "$corpus/seed-manifest-boxes"
    { printf '\001'; cat "$ROOT/fixtures/fuzz_seeds/records/commit.json"; } > "$corpus/seed-commit"
  fi
  for f in "$ROOT"/fixtures/fuzz/* "$ROOT"/fixtures/malicious/* "$ROOT"/fixtures/foreign/torch/*.pt \
           "$ROOT"/fixtures/scan/exploits/*; do
    [ -f "$f" ] && cp -f "$f" "$corpus/" 2>/dev/null || true
  done
  fuzz_run "fuzz_$t for ${SECONDS_EACH}s" "$corpus" "$target" \
    -max_total_time="$SECONDS_EACH" -max_len=65536 -rss_limit_mb=2048 -timeout=10 \
    -print_final_stats=1 "$corpus"
done
fuzz_finish
