// FileReader: bounded, positioned reads of one untrusted file (pread, no mmap).
//
// Every reader of foreign checkpoints goes through this class so that (1) a metadata-only audit
// provably touches only the bytes it asks for — `bytes_read()` counts them, and tests assert that
// auditing a .pt reads the zip directory and data.pkl only — and (2) a read past the end of a file
// is a Status naming the file, never a short buffer. A FileReader owns its descriptor; it may be
// shared by threads for reads (pread has no shared offset) but the counter is only advisory then.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "ckpt/base/status.h"

namespace ckpt::verify {

class FileReader {
 public:
  // Opens `path` read-only. NotFound/IoError when it cannot be opened; InvalidArgument for a
  // directory.
  static Result<std::unique_ptr<FileReader>> open(const std::string& path);
  // An in-memory "file" (fuzzers, unit tests, DCP items nested in a byte range).
  static std::unique_ptr<FileReader> from_bytes(std::string name, std::string bytes);
  ~FileReader();
  FileReader(const FileReader&) = delete;
  FileReader& operator=(const FileReader&) = delete;

  const std::string& name() const { return name_; }
  uint64_t size() const { return size_; }
  // Reads exactly `len` bytes at `offset` into `out`; Corrupt "truncated" when the range is not
  // inside the file (checked without overflow).
  Status read_at(uint64_t offset, size_t len, void* out) const;
  Result<std::string> read_string(uint64_t offset, size_t len) const;
  uint64_t bytes_read() const { return bytes_read_; }

 private:
  FileReader() = default;
  std::string name_;
  int fd_ = -1;
  uint64_t size_ = 0;
  std::string memory_;  // used when fd_ < 0
  mutable uint64_t bytes_read_ = 0;
};

// True when [offset, offset+len) lies inside [0, size), computed without overflow.
inline bool range_inside(uint64_t offset, uint64_t len, uint64_t size) {
  return offset <= size && len <= size - offset;
}

}  // namespace ckpt::verify
