// ckpt/io/host_memory.h: memory a restore fills — zeroed, aligned, huge pages advised where the
// kernel offers them, faulted in on request, released once.
#include "ckpt/io/host_memory.h"

#include <catch2/catch.hpp>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>

#include "tests/common/test_util.h"

namespace ckpt::host_memory_test {
namespace {

constexpr uint64_t kMiB = 1u << 20;

bool all_zero(const unsigned char* p, uint64_t n) {
  for (uint64_t i = 0; i < n; ++i) {
    if (p[i] != 0) return false;
  }
  return true;
}

// The /proc/self/smaps record of the mapping that holds `p` ("" when none does).
std::string smaps_of(const void* p) {
  const auto at = reinterpret_cast<uintptr_t>(p);
  std::ifstream f("/proc/self/smaps");
  std::string line, record;
  bool inside = false;
  while (std::getline(f, line)) {
    uintptr_t lo = 0, hi = 0;
    char dash = 0;
    std::istringstream head(line);
    if (head >> std::hex >> lo >> dash >> hi && dash == '-' && line.find(':') > line.find(' ')) {
      if (inside) return record;
      inside = lo <= at && at < hi;
      record.clear();
    }
    if (inside) record += line + "\n";
  }
  return inside ? record : "";
}

TEST_CASE("host memory is zeroed, writable and page aligned, any size", "[host_memory]") {
  for (uint64_t n :
       {uint64_t{0}, uint64_t{1}, uint64_t{4095}, 2 * kMiB - 1, 2 * kMiB + 1, 5 * kMiB + 3}) {
    for (bool populate : {false, true}) {
      auto m = HostMemory::allocate(n, populate, "a test");
      REQUIRE(m.is_ok());
      CHECK(m->size() == n);
      REQUIRE(m->data() != nullptr);
      CHECK(reinterpret_cast<uintptr_t>(m->data()) % 4096 == 0);
      CHECK(all_zero(m->data(), n));
      for (uint64_t i = 0; i < n; i += 4093) m->data()[i] = static_cast<unsigned char>(i | 1);
      CHECK(m->huge_bytes() % (2 * kMiB) == 0);
      CHECK(m->huge_bytes() <= n);
    }
  }
}

TEST_CASE("the 2 MiB-aligned part is advised to use huge pages when the kernel offers them",
          "[host_memory]") {
  auto m = HostMemory::allocate(5 * kMiB + 7, false, "a test");
  REQUIRE(m.is_ok());
  if (!huge_pages_enabled()) {
    CHECK(m->huge_bytes() == 0);
    SUCCEED("transparent huge pages are off here (or CKPT_HUGE_PAGES=0): nothing to advise");
    return;
  }
  CHECK(reinterpret_cast<uintptr_t>(m->data()) % (2 * kMiB) == 0);
  CHECK(m->huge_bytes() == 4 * kMiB);
  // The kernel's view: the advised range is its own mapping, eligible for huge pages (smaps'
  // THPeligible, Linux 5.0; "hg" in VmFlags marks MADV_HUGEPAGE).
  const std::string rec = smaps_of(m->data());
  REQUIRE_FALSE(rec.empty());
  CHECK(rec.find(" hg") != std::string::npos);
  // Below 2 MiB nothing is advised.
  auto small = HostMemory::allocate(2 * kMiB - 1, false, "a test");
  REQUIRE(small.is_ok());
  CHECK(small->huge_bytes() == 0);
  CHECK(smaps_of(small->data()).find(" hg") == std::string::npos);
}

TEST_CASE("host memory moves, and is unmapped once", "[host_memory]") {
  auto a = HostMemory::allocate(3 * kMiB, true, "a test");
  REQUIRE(a.is_ok());
  unsigned char* p = a->data();
  p[0] = 7;
  HostMemory b = std::move(a).value();
  CHECK(b.data() == p);
  CHECK(b.data()[0] == 7);
  HostMemory c;
  CHECK(c.data() == nullptr);
  c = std::move(b);
  CHECK(b.data() == nullptr);  // NOLINT(bugprone-use-after-move): moved-from is empty
  CHECK(c.data() == p);
  CHECK_FALSE(smaps_of(p).empty());
  c = HostMemory();
  CHECK(smaps_of(p).empty());  // unmapped
}

TEST_CASE("an allocation the address space cannot hold is an error, not a crash", "[host_memory]") {
  auto m = HostMemory::allocate(uint64_t{1} << 62, false, "a test");
  REQUIRE_FALSE(m.is_ok());
  CHECK(m.status().message().find("host memory for a test") != std::string::npos);
}

// A block malloc hands out, kept out of the optimizer's reach (it may drop a malloc/free pair).
unsigned char* volatile g_block = nullptr;

constexpr bool kAsan = testing::kAddressSanitizer;  // mallinfo2 then accounts nothing

TEST_CASE("fresh tensors of 2 MiB and more get host memory unless malloc has it free",
          "[host_memory]") {
  const bool huge = huge_pages_enabled();
  CHECK_FALSE(prefer_host_memory(2 * kMiB - 1, 0));  // small: the allocator's
  CHECK(prefer_host_memory(2 * kMiB, 0) == huge);
  CHECK(prefer_host_memory(64 * kMiB, 64 * kMiB - 1) == huge);
  CHECK_FALSE(prefer_host_memory(64 * kMiB, 64 * kMiB));  // malloc holds it: touched already
  CHECK_FALSE(prefer_host_memory(uint64_t{1} << 40, uint64_t{1} << 41));
}

TEST_CASE("malloc's free bytes grow when memory is freed", "[host_memory]") {
  // A block under the mmap threshold stays in malloc's heap when freed.
  g_block = static_cast<unsigned char*>(std::malloc(64 * 1024));
  REQUIRE(g_block != nullptr);
  g_block[0] = 1;
  const uint64_t before = malloc_free_bytes();
  std::free(g_block);
  g_block = nullptr;
#if defined(__GLIBC__)
  if (kAsan) {
    CHECK(malloc_free_bytes() == 0);
  } else {
    CHECK(malloc_free_bytes() >= before + 60 * 1024);
  }
#else
  CHECK(malloc_free_bytes() == 0);
  (void)before;
#endif
}

}  // namespace
}  // namespace ckpt::host_memory_test
