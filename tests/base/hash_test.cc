#include "ckpt/base/hash.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <string>
#include <utility>
#include <vector>

namespace ckpt::hash_test {
namespace {

// Known answers: XXH3_64bits with seed 0, as printed by the independent Python `xxhash` module
// (xxhash.xxh3_64_hexdigest).
TEST_CASE("XXH3-64 known-answer vectors", "[base]") {
  REQUIRE(hex64(xxh3_64("", 0)) == "2d06800538d394c2");
  REQUIRE(hex64(xxh3_64("a", 1)) == "e6c632b61e964e1f");
  REQUIRE(hex64(xxh3_64("abc", 3)) == "78af5f94892f3950");
}

TEST_CASE("XXH3-64 of long inputs (the SIMD kernels) matches the reference values", "[base]") {
  // Values from libxxhash's portable build (no run-time dispatch): whichever kernel this build
  // picks must give the same hash, one-shot and streamed in uneven pieces.
  for (auto [n, want] : {std::pair<size_t, const char*>{1u << 20, "6f7c82505ffbc516"},
                         std::pair<size_t, const char*>{1000003, "eef8740468e373bb"}}) {
    std::vector<unsigned char> data(n);
    for (size_t i = 0; i < n; ++i) data[i] = static_cast<unsigned char>(i * 131 + 7);
    REQUIRE(hex64(xxh3_64(data.data(), n)) == want);
    Hasher h;
    for (size_t at = 0; at < n; at += 300007)
      h.update(data.data() + at, std::min<size_t>(300007, n - at));
    REQUIRE(hex64(h.digest()) == want);
  }
}

TEST_CASE("streaming hash equals one-shot hash at every split", "[base]") {
  std::vector<unsigned char> data(5000);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<unsigned char>(i * 131 + 7);
  const uint64_t whole = xxh3_64(data.data(), data.size());
  for (size_t split : {0, 1, 63, 64, 65, 240, 241, 1024, 4999, 5000}) {
    Hasher h;
    h.update(data.data(), split);
    h.update(data.data() + split, data.size() - split);
    REQUIRE(h.digest() == whole);
  }
}

TEST_CASE("hex64 round trip and rejection", "[base]") {
  uint64_t v = 0;
  REQUIRE(parse_hex64("00000000deadbeef", &v));
  REQUIRE(v == 0xdeadbeefULL);
  REQUIRE(hex64(v) == "00000000deadbeef");
  REQUIRE_FALSE(parse_hex64("xyz", &v));
  REQUIRE_FALSE(parse_hex64("00000000deadbeeg", &v));
  REQUIRE_FALSE(parse_hex64("00000000DEADBEEF", &v));
}

}  // namespace
}  // namespace ckpt::hash_test
