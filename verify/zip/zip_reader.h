// ZipReader: the central directory of a zip archive (torch.save's container), read from an
// untrusted file without trusting it.
//
// Reads only the end-of-central-directory records (ZIP64 included) and the central directory;
// a record's bytes are read on request (`read_record`), so listing a multi-GB checkpoint costs a
// few kilobytes. Every size and offset is range-checked against the file; names with `..`, a
// leading `/`, backslashes or NUL are rejected (a checkpoint never needs them, and a tool that
// later extracts the archive must not be steered outside its directory). Stored (method 0) and
// deflated (method 8) records are readable. The reader borrows its RandomAccessFile, which must
// outlive it. Not thread-safe for mutation; const methods may run concurrently.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "ckpt/base/status.h"
#include "ckpt/io/env.h"

namespace ckpt::verify {

struct ZipEntry {
  std::string name;
  uint16_t method = 0;  // 0 stored, 8 deflate
  uint32_t crc32 = 0;   // from the central directory
  uint64_t compressed_size = 0;
  uint64_t size = 0;  // uncompressed
  uint64_t local_header_offset = 0;
};

struct ZipLimits {
  uint64_t max_entries = 1u << 20;
  uint64_t max_central_directory = 256ull << 20;
  uint64_t max_record_read = 1ull << 30;  // largest record read into memory at once
  // Bytes inflated over the reader's lifetime (all records, all calls): a bomb of many records
  // that each inflate honestly stops here.
  uint64_t max_total_inflated = 64ull << 30;
  // Scanning: list entries a strict reader refuses (duplicate names, unsafe names, unknown
  // methods, overlapping data) instead of failing, so every member can still be looked at.
  bool lenient = false;
};

class ZipReader {
 public:
  // Parses the directory of `file`. Corrupt with the file name and what is wrong on bad input.
  static Result<ZipReader> open(const RandomAccessFile& file, const ZipLimits& limits = {});

  const std::vector<ZipEntry>& entries() const { return entries_; }
  const ZipEntry* find(const std::string& name) const;
  // Offset of the first data byte of `e` in the file (reads its 30-byte local header).
  Result<uint64_t> data_offset(const ZipEntry& e) const;
  // The uncompressed bytes of `e` (bounded by limits.max_record_read).
  Result<std::string> read_record(const ZipEntry& e) const;
  // Feeds the uncompressed bytes of `e` to `sink` in chunks of at most 1 MiB, inflating as it
  // goes (memory stays O(chunk) whatever the record claims). Corrupt when the stream is damaged,
  // inflates to other than e.size bytes, or the reader's total inflated bytes pass
  // limits.max_total_inflated; a sink error stops the stream and is returned.
  Status stream_record(const ZipEntry& e,
                       const std::function<Status(const char*, size_t)>& sink) const;
  // The archive prefix torch uses: the first entry's name up to its first '/'.
  std::string prefix() const;
  const RandomAccessFile& file() const { return *file_; }

 private:
  const RandomAccessFile* file_ = nullptr;
  ZipLimits limits_;
  Status parse_directory(const std::string& cd, uint64_t count);
  Status add_entry(ZipEntry ent);
  Status check_overlaps() const;

  std::vector<ZipEntry> entries_;
  mutable uint64_t inflated_ = 0;  // total over stream_record calls
  std::map<std::string, size_t> by_name_;
  uint64_t directory_offset_ = 0;
};

// True when a zip member name is safe: relative, no `..` component, no backslash or NUL.
bool zip_name_is_safe(const std::string& name);

// CRC-32 (IEEE, zip's) of a buffer, continuing from `crc` (0 to start).
uint32_t crc32_update(uint32_t crc, const void* data, size_t len);

}  // namespace ckpt::verify
