// HostMemory: anonymous host memory for bytes a restore is about to fill — a fresh optimizer's
// moments, a whole-checkpoint load, an undo snapshot.
//
// First-touch memory is the largest cost of a restore after a restart. On the development VM
// (2026-12-06), per GB: a fault per 4 KiB page as the bytes land 0.48 s, the same pages faulted
// in by one MADV_POPULATE_WRITE 0.27 s, huge pages 0.15 s / 0.12 s; the copy from the page cache
// they precede 0.16 s. So the 2 MiB-aligned part of every allocation of at least 2 MiB is
// advised to use transparent huge pages (MADV_HUGEPAGE), the tail that does not fill a huge page
// keeps small pages, and `populate` faults it all in with one call where the kernel has
// MADV_POPULATE_WRITE (Linux 5.14). Huge pages are not faster everywhere (on another VM, on
// 2026-12-03, they were two to three times slower: the kernel compacted memory to find them), so
// the advice is given only where a probe (once per process, about 5 ms) finds them faster, the
// kernel offers them (not "never"), and CKPT_HUGE_PAGES is not "0"; CKPT_HUGE_PAGES=1 skips the
// probe. Zero-filled, page-aligned, unmapped by the destructor. Movable, not copyable.
#pragma once

#include <cstddef>
#include <cstdint>

#include "ckpt/base/status.h"

namespace ckpt {

class HostMemory {
 public:
  // `bytes` (0 is allowed: a valid, empty block). `populate`: fault every page in now (the
  // memory is then resident; an allocation the machine cannot back fails here, with an error,
  // not later with a SIGBUS). `what` names the memory in an error: "cannot map N bytes of host
  // memory for WHAT: REASON" (the caller adds the file).
  static Result<HostMemory> allocate(uint64_t bytes, bool populate, const char* what);

  HostMemory() = default;
  HostMemory(HostMemory&& o) noexcept;
  HostMemory& operator=(HostMemory&& o) noexcept;
  HostMemory(const HostMemory&) = delete;
  HostMemory& operator=(const HostMemory&) = delete;
  ~HostMemory();

  unsigned char* data() const { return data_; }
  uint64_t size() const { return size_; }
  // Bytes advised to use huge pages (a multiple of 2 MiB; 0 when not advised).
  uint64_t huge_bytes() const { return huge_; }

 private:
  void* map_ = nullptr;
  size_t map_len_ = 0;
  unsigned char* data_ = nullptr;
  uint64_t size_ = 0;
  uint64_t huge_ = 0;
};

// Bytes the process's malloc holds free and already faulted in (glibc's mallinfo2 fordblks; 0
// where it cannot be asked). Memory freed before a restore (a model built whole, then sharded)
// costs nothing to touch again: a caller that can take it from malloc should, rather than ask
// for new pages here.
uint64_t malloc_free_bytes();

// Whether allocations are advised to use huge pages (above). Decided once per process.
bool huge_pages_enabled();

// Whether a tensor of `nbytes` that a restore allocates and then fills (a fresh optimizer's
// moment) should live in HostMemory rather than in its allocator's memory: it is at least 2 MiB,
// huge pages are enabled, and malloc holds less than `nbytes` free (`malloc_free`; memory malloc
// holds costs nothing to touch again). The one rule of the C++ Checkpointer (fresh_like) and the
// Python package (ckpt/_memory.py).
bool prefer_host_memory(uint64_t nbytes, uint64_t malloc_free);
inline bool prefer_host_memory(uint64_t nbytes) {
  return prefer_host_memory(nbytes, malloc_free_bytes());
}

}  // namespace ckpt
