// The region digest of a rank file: one XXH3-64 that covers every byte of the file, built from the
// tensors' own hashes and the hashes of the bytes between them (HDF5 metadata, padding), so that a
// reader which has verified every tensor's hash needs to hash only those few other bytes to check
// the whole file — no second pass over the tensor bytes, and no order between the chunks of a
// parallel read (the whole-file XXH3 is sequential). docs/format.md §2.
//
// The file is cut into regions in offset order: each tensor with bytes is one region, and each
// maximal run of bytes between them (or before the first, or after the last) is one. The digest is
// the XXH3-64 of the regions' (offset, length, XXH3-64 of the region's bytes) as little-endian
// 64-bit words, in order. For a tensor region the hash is the tensor's own (the manifest's xxh3).
#pragma once

#include <cstdint>
#include <vector>

#include "ckpt/format/manifest.h"

namespace ckpt {

struct FileRegion {
  uint64_t offset = 0;
  uint64_t nbytes = 0;
  uint64_t xxh3 = 0;    // of the region's bytes; for a gap, filled in by the caller
  bool tensor = false;  // a tensor's bytes (xxh3 = the manifest's), else a gap
};

// The regions of a file of `file_bytes` bytes holding `m`'s tensors (which decode_manifest has
// checked: inside the file, no overlap). Gaps have xxh3 = 0 until the caller hashes them.
std::vector<FileRegion> file_regions(const Manifest& m, uint64_t file_bytes);

uint64_t regions_digest(const std::vector<FileRegion>& regions);

}  // namespace ckpt
