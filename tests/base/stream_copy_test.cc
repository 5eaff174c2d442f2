// ckpt/base/stream_copy.h: the same bytes as memcpy, whatever the size and the alignment of
// either end, and nothing written outside the destination.
#include "ckpt/base/stream_copy.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdint>
#include <random>
#include <vector>

namespace ckpt::stream_copy_test {
namespace {

TEST_CASE("stream_copy copies exactly like memcpy at any size and alignment", "[stream_copy]") {
  std::mt19937 g(3);
  std::vector<unsigned char> src(3 * kStreamCopyMin + 4096);
  for (auto& b : src) b = static_cast<unsigned char>(g());
  for (size_t n :
       {size_t{0}, size_t{1}, size_t{63}, kStreamCopyMin - 1, kStreamCopyMin, kStreamCopyMin + 1,
        kStreamCopyMin + 63, 2 * kStreamCopyMin + 17, 3 * kStreamCopyMin}) {
    for (size_t src_off : {0, 1, 15, 16, 33}) {
      for (size_t dst_off : {0, 3, 16, 31}) {
        std::vector<unsigned char> dst(n + 160, 0xEE);
        stream_copy(dst.data() + 64 + dst_off, src.data() + src_off, n);
        INFO("n " << n << " src +" << src_off << " dst +" << dst_off);
        const unsigned char* at = dst.data() + 64 + dst_off;
        const unsigned char* begin = dst.data();
        REQUIRE(std::all_of(begin, at, [](unsigned char b) { return b == 0xEE; }));
        REQUIRE(std::equal(at, at + n, src.data() + src_off));
        REQUIRE(std::all_of(at + n, begin + dst.size(), [](unsigned char b) { return b == 0xEE; }));
      }
    }
  }
}

}  // namespace
}  // namespace ckpt::stream_copy_test
