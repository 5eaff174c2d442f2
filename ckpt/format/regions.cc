#include "ckpt/format/regions.h"

#include <algorithm>

#include "ckpt/base/hash.h"

namespace ckpt {

std::vector<FileRegion> file_regions(const Manifest& m, uint64_t file_bytes) {
  std::vector<const ManifestEntry*> t;
  for (const auto& e : m.tensors) {
    if (e.nbytes > 0) t.push_back(&e);
  }
  std::sort(t.begin(), t.end(), [](auto* a, auto* b) { return a->offset < b->offset; });
  std::vector<FileRegion> out;
  uint64_t pos = 0;
  for (const ManifestEntry* e : t) {
    if (e->offset > pos) out.push_back({pos, e->offset - pos, 0, false});
    out.push_back({e->offset, e->nbytes, e->xxh3, true});
    pos = std::max(pos, e->offset + e->nbytes);
  }
  if (file_bytes > pos) out.push_back({pos, file_bytes - pos, 0, false});
  return out;
}

uint64_t regions_digest(const std::vector<FileRegion>& regions) {
  Hasher h;
  for (const FileRegion& r : regions) {
    const uint64_t words[3] = {r.offset, r.nbytes, r.xxh3};
    unsigned char bytes[24];
    for (int w = 0; w < 3; ++w) {
      for (int b = 0; b < 8; ++b)
        bytes[w * 8 + b] = static_cast<unsigned char>(words[w] >> (8 * b));
    }
    h.update(bytes, sizeof bytes);
  }
  return h.digest();
}

}  // namespace ckpt
