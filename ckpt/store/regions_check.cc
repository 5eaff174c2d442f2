#include "ckpt/store/regions_check.h"

#include <algorithm>
#include <memory>
#include <vector>

#include "ckpt/base/hash.h"
#include "ckpt/format/regions.h"

namespace ckpt::store {

Result<uint64_t> regions_digest_of(const RandomAccessFile& file, const Manifest& m,
                                   uint64_t file_bytes) {
  constexpr size_t kChunk = 1u << 20;
  std::vector<FileRegion> regions = file_regions(m, file_bytes);
  std::unique_ptr<unsigned char[]> buf(new unsigned char[kChunk]);
  for (FileRegion& r : regions) {
    if (r.tensor) continue;
    Hasher h;
    for (uint64_t done = 0; done < r.nbytes;) {
      const size_t n = static_cast<size_t>(std::min<uint64_t>(kChunk, r.nbytes - done));
      CKPT_RETURN_IF_ERROR(file.read_at(r.offset + done, buf.get(), n));
      h.update(buf.get(), n);
      done += n;
    }
    r.xxh3 = h.digest();
  }
  return regions_digest(regions);
}

}  // namespace ckpt::store
