#include "ckpt/loader/epoch_permutation.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdint>
#include <stdexcept>
#include <unordered_set>
#include <vector>

namespace ckpt::loader::epoch_permutation_test {
namespace {

// Exhaustive: every position maps into [0, n), no id twice, and index_of inverts at().
void require_bijection(uint64_t n, uint64_t seed, uint64_t epoch) {
  EpochPermutation p(n, seed, epoch);
  REQUIRE(p.size() == n);
  std::vector<bool> seen(n, false);
  for (uint64_t i = 0; i < n; ++i) {
    const uint64_t v = p.at(i);
    REQUIRE(v < n);
    REQUIRE_FALSE(seen[v]);
    seen[v] = true;
    REQUIRE(p.index_of(v) == i);
  }
}

TEST_CASE("EpochPermutation is a bijection of 0..n-1 for many n", "[loader]") {
  std::vector<uint64_t> sizes = {1,  2,  3,  4,  5,  6,   7,    8,    9,     10,
                                 11, 13, 17, 31, 97, 101, 1000, 4093, 65521, 999983};
  for (int k = 1; k <= 20; ++k) {
    const uint64_t p2 = uint64_t{1} << k;
    sizes.push_back(p2 - 1);
    sizes.push_back(p2);
    sizes.push_back(p2 + 1);
  }
  for (uint64_t n : sizes) {
    INFO("n = " << n);
    require_bijection(n, 0, 0);
    if (n < 5000) require_bijection(n, 0xdeadbeefcafef00dULL, 7);
  }
}

TEST_CASE("EpochPermutation at n = 10^9 and beyond: no collisions, inverse consistent",
          "[loader]") {
  for (uint64_t n :
       {uint64_t{1000000000}, uint64_t{1000000007}, (uint64_t{1} << 40) + 1, uint64_t{1} << 62}) {
    INFO("n = " << n);
    EpochPermutation p(n, 42, 3);
    std::unordered_set<uint64_t> ids;
    const uint64_t stride = n / 20011 + 1;
    int count = 0;
    for (uint64_t pos = 0; pos < n && count < 20000; pos += stride, ++count) {
      const uint64_t v = p.at(pos);
      REQUIRE(v < n);
      REQUIRE(ids.insert(v).second);
      REQUIRE(p.index_of(v) == pos);
    }
    // The last positions too: cycle walking must terminate there as well.
    for (uint64_t pos = n - 100; pos < n; ++pos) {
      const uint64_t v = p.at(pos);
      REQUIRE(v < n);
      REQUIRE(p.index_of(v) == pos);
    }
  }
}

TEST_CASE("EpochPermutation orders differ across epochs and seeds, agree across instances",
          "[loader]") {
  const uint64_t n = 100000;
  EpochPermutation a(n, 1, 0), a2(n, 1, 0), next_epoch(n, 1, 1), other_seed(n, 2, 0);
  int same_epoch = 0, same_seed = 0;
  for (uint64_t i = 0; i < n; ++i) {
    REQUIRE(a.at(i) == a2.at(i));
    same_epoch += a.at(i) == next_epoch.at(i);
    same_seed += a.at(i) == other_seed.at(i);
  }
  // Two independent random permutations share about one fixed point; allow a wide margin.
  CHECK(same_epoch < 20);
  CHECK(same_seed < 20);
  // Not the identity either, and not a rotation: look at a few displacements.
  int fixed = 0;
  for (uint64_t i = 0; i < n; ++i) fixed += a.at(i) == i;
  CHECK(fixed < 20);
}

TEST_CASE("EpochPermutation: n = 2 is shuffled for some seeds and not for others", "[loader]") {
  int swapped = 0;
  for (uint64_t seed = 0; seed < 200; ++seed) swapped += EpochPermutation(2, seed, 0).at(0) == 1;
  CHECK(swapped > 60);
  CHECK(swapped < 140);
}

TEST_CASE("EpochPermutation identity and argument errors", "[loader]") {
  auto id = EpochPermutation::identity(10);
  REQUIRE_FALSE(id.shuffled());
  for (uint64_t i = 0; i < 10; ++i) REQUIRE(id.at(i) == i);
  REQUIRE_THROWS_AS(EpochPermutation(0, 1, 1), std::invalid_argument);
  REQUIRE_THROWS_AS(id.at(10), std::out_of_range);
  REQUIRE_THROWS_AS(EpochPermutation(5, 1, 1).index_of(5), std::out_of_range);
}

}  // namespace
}  // namespace ckpt::loader::epoch_permutation_test

namespace ckpt::loader::epoch_permutation_test {
namespace {

// A keyed permutation should put every id first about equally often across seeds. With 6000 seeds
// and n = 6 each count is Binomial(6000, 1/6): mean 1000, sd ~29; 850..1150 is > 5 sd.
TEST_CASE("EpochPermutation: first id is uniform across seeds (n = 6) and epochs (n = 5)",
          "[loader]") {
  std::vector<int> by_seed(6, 0), by_epoch(5, 0);
  for (uint64_t k = 0; k < 6000; ++k) {
    ++by_seed[EpochPermutation(6, k, 0).at(0)];
    ++by_epoch[EpochPermutation(5, 99, k).at(0)];
  }
  for (int c : by_seed) CHECK((c > 850 && c < 1150));
  for (int c : by_epoch) CHECK((c > 1000 && c < 1400));  // mean 1200, sd ~31
}

// Neighbouring positions must not map to neighbouring ids (a weak mixer shows up here first).
TEST_CASE("EpochPermutation: adjacent positions are decorrelated", "[loader]") {
  const uint64_t n = 1000000;
  EpochPermutation p(n, 5, 0);
  int close = 0;
  for (uint64_t i = 0; i + 1 < 100000; ++i) {
    const uint64_t a = p.at(i), b = p.at(i + 1);
    close += (a > b ? a - b : b - a) < 1000;  // probability ~0.2% for independent ids
  }
  CHECK(close < 400);
}

}  // namespace
}  // namespace ckpt::loader::epoch_permutation_test

namespace ckpt::loader::epoch_permutation_test {
namespace {

TEST_CASE("EpochPermutation: at_many and at_range agree with at()", "[loader]") {
  for (uint64_t n : {uint64_t{1}, uint64_t{2}, uint64_t{7}, uint64_t{9}, uint64_t{1000},
                     uint64_t{65537}, uint64_t{1000000000}}) {
    INFO("n = " << n);
    EpochPermutation p(n, 11, 2);
    const size_t count = static_cast<size_t>(std::min<uint64_t>(n, 1003));  // not a multiple of 8
    std::vector<uint64_t> ids(count), positions(count);
    const uint64_t first = n - count;
    p.at_range(first, count, ids.data());
    for (size_t i = 0; i < count; ++i) {
      REQUIRE(ids[i] == p.at(first + i));
      positions[i] = (first + i * 7919) % n;
    }
    std::vector<uint64_t> in_place = positions;
    p.at_many(in_place.data(), in_place.size(), in_place.data());
    for (size_t i = 0; i < count; ++i) REQUIRE(in_place[i] == p.at(positions[i]));
  }
  EpochPermutation p(100, 1, 1);
  std::vector<uint64_t> out(16);
  REQUIRE_THROWS_AS(p.at_range(90, 16, out.data()), std::out_of_range);
  std::vector<uint64_t> bad = {1, 2, 3, 4, 5, 6, 7, 100};
  REQUIRE_THROWS_AS(p.at_many(bad.data(), bad.size(), out.data()), std::out_of_range);
}

}  // namespace
}  // namespace ckpt::loader::epoch_permutation_test
