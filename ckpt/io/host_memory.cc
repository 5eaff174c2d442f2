#include "ckpt/io/host_memory.h"

#include <sys/mman.h>
#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <utility>

namespace ckpt {
namespace {

constexpr uint64_t kHuge = 2u << 20;

// The first byte of `p` on a 2 MiB boundary (pointer arithmetic: no integer-to-pointer cast).
unsigned char* huge_aligned(void* p) {
  const uint64_t off = reinterpret_cast<uintptr_t>(p) % kHuge;
  return static_cast<unsigned char*>(p) + (off == 0 ? 0 : kHuge - off);
}

bool kernel_offers_huge_pages() {
  std::ifstream f("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string modes;
  if (!std::getline(f, modes)) return false;
  return modes.find("[never]") == std::string::npos;
}

// Seconds to fault in 4 MiB of fresh, 2 MiB-aligned memory by writing a byte per 4 KiB page, as a
// restore's reads fault in their destinations; with `huge`, advised to use huge pages first.
// Infinity when the memory cannot be had.
double fault_in_seconds(bool huge) {
  constexpr size_t kProbe = 4u << 20;
  void* p =
      ::mmap(nullptr, kProbe + kHuge, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return 1e30;
  unsigned char* aligned = huge_aligned(p);
  volatile unsigned char* a = aligned;
  const auto t0 = std::chrono::steady_clock::now();
#ifdef MADV_HUGEPAGE
  if (huge) ::madvise(aligned, kProbe, MADV_HUGEPAGE);
#endif
  for (size_t at = 0; at < kProbe; at += 4096) a[at] = 1;
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ::munmap(p, kProbe + kHuge);
  return s;
}

// Whether huge pages fault in faster than small ones on this machine now. They do on most
// machines (the development VM of 2026-12-06: 0.15 against 0.48 s per GB); on another VM
// (2026-12-03) they were two to three times slower, the kernel compacting memory to find them.
// Best of two tries each, interleaved: about 5 ms, once per process.
bool huge_pages_faster() {
  double small = 1e30, huge = 1e30;
  for (int i = 0; i < 2; ++i) {
    small = std::min(small, fault_in_seconds(false));
    huge = std::min(huge, fault_in_seconds(true));
  }
  return huge < small;
}

}  // namespace

uint64_t malloc_free_bytes() {
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 33))
  return mallinfo2().fordblks;
#else
  return 0;
#endif
}

bool huge_pages_enabled() {
  static const bool enabled = [] {
#ifdef MADV_HUGEPAGE
    const char* env = std::getenv("CKPT_HUGE_PAGES");
    const std::string choice = env != nullptr ? env : "";
    if (choice == "0" || !kernel_offers_huge_pages()) return false;
    return choice == "1" || huge_pages_faster();
#else
    return false;
#endif
  }();
  return enabled;
}

bool prefer_host_memory(uint64_t nbytes, uint64_t malloc_free) {
  return nbytes >= kHuge && huge_pages_enabled() && malloc_free < nbytes;
}

Result<HostMemory> HostMemory::allocate(uint64_t bytes, bool populate, const char* what) {
  HostMemory m;
  m.size_ = bytes;
  const bool huge = bytes >= kHuge && huge_pages_enabled();
  // Room to put the data on a 2 MiB boundary when huge pages are advised.
  const uint64_t want = std::max<uint64_t>(bytes, 1) + (huge ? kHuge : 0);
  if (want > SIZE_MAX / 2) return io_error(std::string("cannot map host memory for ") + what);
  m.map_len_ = static_cast<size_t>(want);
  void* p = ::mmap(nullptr, m.map_len_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) {
    return io_error("cannot map " + std::to_string(bytes) + " bytes of host memory for " + what +
                    ": " + std::strerror(errno));
  }
  m.map_ = p;
  m.data_ = huge ? huge_aligned(p) : static_cast<unsigned char*>(p);
#ifdef MADV_HUGEPAGE
  // Advice only: where it is refused the memory works with small pages.
  if (huge && ::madvise(m.data_, bytes / kHuge * kHuge, MADV_HUGEPAGE) == 0) {
    m.huge_ = bytes / kHuge * kHuge;
  }
#endif
  if (populate && bytes > 0) {
#ifdef MADV_POPULATE_WRITE
    if (::madvise(m.data_, static_cast<size_t>(bytes), MADV_POPULATE_WRITE) == 0) return m;
    if (errno != EINVAL) {  // out of memory: say so now, not with a SIGBUS later
      return io_error("cannot populate " + std::to_string(bytes) + " bytes of host memory for " +
                      what + ": " + std::strerror(errno));
    }
#endif
    volatile unsigned char* q = m.data_;
    for (uint64_t at = 0; at < bytes; at += 4096) q[at] = 0;
  }
  return m;
}

HostMemory::HostMemory(HostMemory&& o) noexcept
    : map_(std::exchange(o.map_, nullptr)),
      map_len_(std::exchange(o.map_len_, 0)),
      data_(std::exchange(o.data_, nullptr)),
      size_(std::exchange(o.size_, 0)),
      huge_(std::exchange(o.huge_, 0)) {}

HostMemory& HostMemory::operator=(HostMemory&& o) noexcept {
  if (this != &o) {
    HostMemory gone(std::move(*this));
    map_ = std::exchange(o.map_, nullptr);
    map_len_ = std::exchange(o.map_len_, 0);
    data_ = std::exchange(o.data_, nullptr);
    size_ = std::exchange(o.size_, 0);
    huge_ = std::exchange(o.huge_, 0);
  }
  return *this;
}

HostMemory::~HostMemory() {
  if (map_ != nullptr) ::munmap(map_, map_len_);
}

}  // namespace ckpt
