// libFuzzer target: the decoders of our own commit record (COMMIT.json) and rank manifest, which
// `ckpt verify`, `ckpt audit` and every restore read from disk before trusting anything else.
// The first byte picks the decoder; the rest is the text. Any input must give a value or a
// Status, never a crash, a sanitizer report or unbounded memory.
#include <cstddef>
#include <cstdint>
#include <string>

#include "ckpt/format/manifest.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string text(reinterpret_cast<const char*>(data) + 1, size - 1);
  if (data[0] % 2 == 0) {
    auto m = ckpt::decode_manifest(text, "fuzz.manifest.json");
    if (m.is_ok()) (void)ckpt::encode_manifest(*m);
  } else {
    auto c = ckpt::decode_commit(text, "COMMIT.json");
    if (c.is_ok()) (void)ckpt::encode_commit(*c);
  }
  return 0;
}
