// A RandomAccessFile that keeps what it reads: the check-first restore (restore.h) reads a file
// twice — once to check every hash, once to fill the destinations. On a local disk the page cache
// serves the second read; an object store has none, so the second read would download the file
// again. Over a remote file (ReadProfile::remote) the restore reads through a ReadCache instead:
// the first read keeps the bytes (up to a budget; only those the second read wants, when told:
// keep_only), the second is a copy from memory of the very bytes that were checked. What is not
// held (over the budget, never read, or not wanted) is read from the file. Thread-safe like any
// RandomAccessFile, but keep_only is called before the reads.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ckpt/io/env.h"
#include "ckpt/io/host_memory.h"

namespace ckpt::resume {

class ReadCache final : public RandomAccessFile {
 public:
  // `base` must outlive the cache. At most `budget` bytes are held.
  ReadCache(const RandomAccessFile& base, uint64_t budget) : base_(base), budget_(budget) {}
  Status read_at(uint64_t offset, void* dst, size_t n) const override;
  Status read_scatter_at(uint64_t offset, const ReadSpan* spans, size_t count) const override;
  // Held bytes copied out with stream_copy (ckpt/base/stream_copy.h).
  Status read_scatter_streaming(uint64_t offset, const ReadSpan* spans,
                                size_t count) const override;
  // The checking read's bytes, hashed where the cache holds them: a range a block holds is
  // visited there; a range nothing holds that is to be kept (keep_only, the budget) is
  // downloaded straight into a new block, visited as its parts land (read_visiting), and kept —
  // no staging copy. Else false.
  Result<bool> visit_at(uint64_t offset, size_t n, ByteVisitor visit, void* arg) const override;
  uint64_t size() const override { return base_.size(); }
  const std::string& path() const override { return base_.path(); }
  std::string version() const override { return base_.version(); }
  ReadProfile read_profile() const override { return base_.read_profile(); }
  // Holds only what lies in these byte ranges ([begin, end) of the file, any order) from now on:
  // the second read's (a check-first restore's fresh destinations are filled by the first).
  void keep_only(std::vector<std::pair<uint64_t, uint64_t>> ranges);
  uint64_t held_bytes() const;
  // Bytes served from memory, and bytes read from the file, so far.
  uint64_t hits() const;
  uint64_t misses() const;

 private:
  struct Block {
    HostMemory large;  // 2 MiB and more
    std::unique_ptr<unsigned char[]> small;
    uint64_t n = 0;
    unsigned char* data() const { return small ? small.get() : large.data(); }
  };
  static Block new_block(uint64_t n);
  // Copies what the held blocks have of [offset, offset+n) into dst and reads the rest from
  // base_, keeping what it read while under the budget.
  Status serve(uint64_t offset, unsigned char* dst, uint64_t n, bool streaming = false) const;
  Status scatter(uint64_t offset, const ReadSpan* spans, size_t count, bool streaming) const;
  void keep(uint64_t offset, const unsigned char* bytes, uint64_t n) const;
  bool overlaps(uint64_t from,
                uint64_t to) const;                // a held block has bytes in [from, to); mu_ held
  bool wanted(uint64_t from, uint64_t to) const;   // keep_only allows all of [from, to); mu_ held
  bool covered(uint64_t from, uint64_t to) const;  // held blocks hold all of [from, to); mu_ held

  const RandomAccessFile& base_;
  const uint64_t budget_;
  mutable std::mutex mu_;
  mutable std::map<uint64_t, Block> blocks_;  // by start offset; never overlapping
  std::optional<std::vector<std::pair<uint64_t, uint64_t>>> only_;  // sorted, disjoint
  mutable uint64_t held_ = 0, hits_ = 0, misses_ = 0;
};

// The budget a check-first restore of `nbytes` from a remote file gets by default: all of it
// when at most half of the machine's available memory, else that half.
uint64_t default_cache_budget(uint64_t nbytes);

}  // namespace ckpt::resume
