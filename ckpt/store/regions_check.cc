#include "ckpt/store/regions_check.h"

#include <algorithm>
#include <memory>
#include <vector>

#include "ckpt/base/hash.h"
#include "ckpt/format/regions.h"

namespace ckpt::store {
namespace {

constexpr uint64_t kWindow = 1u << 20;  // largest read
// A tensor this small between two gaps is read past rather than cut into two reads (copying it
// costs about what a syscall does): in a file of many small tensors every gap is a dataset header
// and some padding, so a read per gap would be a syscall per tensor.
constexpr uint64_t kReadPast = 32u << 10;

// The last region index, from gap `first` on, that one read of at most kWindow bytes covers:
// later gaps are joined while the tensors between them are at most kReadPast each.
size_t window_end(const std::vector<FileRegion>& regions, size_t first) {
  const uint64_t start = regions[first].offset;
  size_t last = first;
  for (size_t k = first + 1; k < regions.size(); ++k) {
    const FileRegion& r = regions[k];
    if (r.offset + r.nbytes - start > kWindow) break;
    if (r.tensor) {
      if (r.nbytes > kReadPast) break;
      continue;
    }
    last = k;
  }
  return last;
}

}  // namespace

Result<uint64_t> regions_digest_of(const RandomAccessFile& file, const Manifest& m,
                                   uint64_t file_bytes) {
  std::vector<FileRegion> regions = file_regions(m, file_bytes);
  std::unique_ptr<unsigned char[]> buf;
  for (size_t i = 0; i < regions.size(); ++i) {
    FileRegion& r = regions[i];
    if (r.tensor) continue;
    if (!buf) buf.reset(new unsigned char[kWindow]);
    if (r.nbytes > kWindow) {  // a large gap: streamed in windows
      Hasher h;
      for (uint64_t done = 0; done < r.nbytes;) {
        const size_t n = static_cast<size_t>(std::min<uint64_t>(kWindow, r.nbytes - done));
        CKPT_RETURN_IF_ERROR(file.read_at(r.offset + done, buf.get(), n));
        h.update(buf.get(), n);
        done += n;
      }
      r.xxh3 = h.digest();
      continue;
    }
    // One read from this gap to the last one it can join; each gap in it hashed on its own.
    const size_t last = window_end(regions, i);
    const uint64_t start = r.offset;
    const FileRegion& end = regions[last];
    CKPT_RETURN_IF_ERROR(
        file.read_at(start, buf.get(), static_cast<size_t>(end.offset + end.nbytes - start)));
    for (size_t k = i; k <= last; ++k) {
      if (!regions[k].tensor) {
        regions[k].xxh3 = xxh3_64(buf.get() + (regions[k].offset - start), regions[k].nbytes);
      }
    }
    i = last;
  }
  return regions_digest(regions);
}

}  // namespace ckpt::store
