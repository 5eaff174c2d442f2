// FileMapping: reads of a local file's cached bytes through a read-only mapping instead of
// pread, for the restore's warm reads.
//
// A pread from the page cache is a copy the kernel makes page by page; a mapping lets the reader
// hash the cached bytes where they lie (no copy at all: a check-first restore's checking read)
// or copy them with the C library's memcpy. On the development VM (2026-12-06, 2 threads, 1 GB
// cached): pread + XXH3 0.09–0.10 s against 0.08 s hashed from the mapping; pread into live
// memory 0.10 s against memcpy 0.07 s; the mapping's page tables cost about 0.02 s per GB to
// build and as much to tear down. `restore_latest` into live memory: 0.147 → 0.125 s. Only bytes
// already in the page cache are read this way (mincore): a cold read through a mapping would
// fault them in 4–128 KiB at a time, where pread's large reads are faster. Where mapped reads
// are not faster (a probe, once per process, about 3 ms: 4 MiB of a memfd hashed both ways) or
// CKPT_MAPPED_READS=0, files read with pread only; CKPT_MAPPED_READS=1 skips the probe.
//
// A mapped file that shrinks underneath its reader (truncated by another process) raises SIGBUS
// on the next access. Every access to mapped bytes therefore runs under guard_sigbus(), which
// turns that SIGBUS into a false return (the caller reports the file as truncated) instead of
// the death of the process.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

namespace ckpt {

class FileMapping {
 public:
  // A mapping of the first `size` bytes of `fd` (which it does not own), or null when mapped
  // reads are off or the file cannot be mapped (a caller then reads with pread).
  static std::unique_ptr<FileMapping> open(int fd, uint64_t size);
  ~FileMapping();
  FileMapping(const FileMapping&) = delete;
  FileMapping& operator=(const FileMapping&) = delete;

  // Whether every page of [offset, offset + n) is in the page cache now. The range must lie in
  // the mapping.
  bool resident(uint64_t offset, uint64_t n) const;
  const unsigned char* data() const { return data_; }
  uint64_t size() const { return size_; }

 private:
  FileMapping(unsigned char* data, uint64_t size) : data_(data), size_(size) {}
  unsigned char* data_;
  uint64_t size_;
};

// Runs fn(arg). True when it returned; false when a SIGBUS raised by this thread while it ran
// (mapped bytes of a file that shrank) cut it short. fn must only read and write plain memory:
// nothing it holds is released when it is cut short (no locks, no allocation, no objects with
// destructors). A SIGBUS outside a guard goes to the handler installed before (the default
// one kills the process, as without ckpt).
bool guard_sigbus(void (*fn)(void*), void* arg);

// Whether FileMapping::open maps files (above). Decided once per process, unless overridden.
bool mapped_reads_enabled();
// Tests: force mapped reads on (1) or off (0), or back to the probe's decision (-1).
void override_mapped_reads(int choice);

}  // namespace ckpt
