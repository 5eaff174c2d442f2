// A manifest's fields as written, before decode_manifest checks them (ckpt/format/manifest.h),
// and the fast way to them for the manifests ckpt writes.
//
// decode_manifest reads untrusted JSON through nlohmann's DOM: 1.8 ms for the 124 KB manifest of
// a 255-box FSDP2 rank file, 5.4 ms for one of 1,376 tensors, on every restore (twice for a
// sharded one). scan_manifest reads the same fields in one pass without a DOM, but only from
// text in the exact shape encode_manifest writes — any key order and whitespace, ASCII strings
// without escapes, integer numbers that fit, every field present and well typed, no key twice,
// no key it does not know. Anything else is nullopt, and decode_manifest parses it as JSON:
// the one place that says what is wrong with a manifest. Both paths then make the same checks
// (check_entry in manifest.cc) in the same order, so they accept and refuse alike
// (tests/store/manifest_scan_test.cc compares them on mutated manifests).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ckpt/format/manifest.h"

namespace ckpt {

// One "tensors" entry. `entry` holds path, shape, offset, nbytes and xxh3; its dtype, box and
// chunks are set by the checks, from the fields below.
struct ManifestDraftEntry {
  ManifestEntry entry;
  std::string dtype;
  bool has_box = false;
  bool box_ill_typed = false;  // not {"global_shape": [ints], "offsets": [ints], "placement": s}
  BoxOf box;
  bool has_chunks = false;
  bool chunks_ill_typed = false;  // not {"bytes": unsigned, "xxh3": [...]}
  uint64_t chunk_bytes = 0;
  size_t chunk_count = 0;         // entries of "xxh3"
  bool chunk_digest_bad = false;  // one of them is not 16 lowercase hex digits
  std::vector<uint64_t> chunk_xxh3;
};

// The header fields of `header` (file, file_bytes, step, rank, world_size, attrs_xxh3, and
// file_xxh3 / regions_xxh3 when present; its tensors empty), then every entry in file order.
struct ManifestDraft {
  Manifest header;
  std::vector<ManifestDraftEntry> tensors;
};

// The fields of `text` when it is a manifest as encode_manifest writes it (above); nullopt
// otherwise — never an error of its own.
std::optional<ManifestDraft> scan_manifest(std::string_view text);

// decode_manifest through nlohmann's DOM only (no scan_manifest): for the tests that compare
// the two paths.
Result<Manifest> decode_manifest_dom(const std::string& text, const std::string& where);

}  // namespace ckpt
