// libFuzzer target: the decoders of our own commit record (COMMIT.json) and rank manifest, which
// `ckpt verify`, `ckpt audit` and every restore read from disk before trusting anything else.
// The first byte picks the decoder; the rest is the text. Any input must give a value or a
// Status, never a crash, a sanitizer report or unbounded memory. A manifest is decoded twice —
// decode_manifest (its fast reader where the text allows, ckpt/format/manifest_scan.h) and
// nlohmann's DOM alone — and the two must agree: the same manifest, or the same error.
#include <cstddef>
#include <cstdint>
#include <string>

#include "ckpt/format/manifest.h"
#include "ckpt/format/manifest_scan.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string text(reinterpret_cast<const char*>(data) + 1, size - 1);
  if (data[0] % 2 == 0) {
    auto m = ckpt::decode_manifest(text, "fuzz.manifest.json");
    auto dom = ckpt::decode_manifest_dom(text, "fuzz.manifest.json");
    if (m.is_ok() != dom.is_ok()) __builtin_trap();
    if (m.is_ok() ? ckpt::encode_manifest(*m) != ckpt::encode_manifest(*dom)
                  : m.status().to_string() != dom.status().to_string()) {
      __builtin_trap();
    }
  } else {
    auto c = ckpt::decode_commit(text, "COMMIT.json");
    if (c.is_ok()) (void)ckpt::encode_commit(*c);
  }
  return 0;
}
