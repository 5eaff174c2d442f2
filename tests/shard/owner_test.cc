// The ownership rule for replicated tensors: the same owners on every rank, whatever order the
// tensors were listed in; largest first to the least-loaded rank; tiny ones to the first rank.
#include <algorithm>
#include <catch2/catch.hpp>
#include <random>

#include "ckpt/store/box_owner.h"

namespace ckpt::store::owner_test {
namespace {

std::vector<ReplicatedItem> items() {
  return {{"embed", 1000 << 20}, {"norm.a", 4096},  {"head", 900 << 20}, {"w1", 300 << 20},
          {"w2", 300 << 20},     {"w3", 300 << 20}, {"norm.b", 4096},    {"bias", 2 << 20}};
}

OwnerOptions ranks(int n) {
  OwnerOptions o;
  for (int r = 0; r < n; ++r) o.candidates.push_back(r);
  return o;
}

int64_t owner_of(const std::vector<ReplicatedItem>& list, const OwnerAssignment& a,
                 const std::string& name) {
  for (size_t i = 0; i < list.size(); ++i) {
    if (list[i].name == name) return a.owner[i];
  }
  return -1;
}

TEST_CASE("owners: largest first to the least-loaded rank, ties to the lowest", "[shard]") {
  const auto list = items();
  auto a = assign_owners(list, ranks(3));
  REQUIRE(a.is_ok());
  CHECK(owner_of(list, *a, "embed") == 0);   // 1000 MiB: all empty, lowest rank
  CHECK(owner_of(list, *a, "head") == 1);    // 900
  CHECK(owner_of(list, *a, "w1") == 2);      // 300 (ties among w*: by name)
  CHECK(owner_of(list, *a, "w2") == 2);      // rank 2 has 300 < 900
  CHECK(owner_of(list, *a, "w3") == 2);      // 600 < 900
  CHECK(owner_of(list, *a, "bias") == 1);    // ranks 1 and 2 tie at 900: the lower one
  CHECK(owner_of(list, *a, "norm.a") == 0);  // below 1 MiB: the first rank
  CHECK(owner_of(list, *a, "norm.b") == 0);
  CHECK(a->final_load == std::vector<uint64_t>{(1000u << 20) + 8192, (902u << 20), 900u << 20});
}

TEST_CASE("owners: every rank computes the same owners from any listing order", "[shard]") {
  std::vector<ReplicatedItem> list;
  for (int i = 0; i < 200; ++i) list.push_back({"t" + std::to_string(i), uint64_t(i % 17) << 20});
  OwnerOptions o = ranks(8);
  o.initial_load = {5 << 20, 0, 0, 9 << 20, 0, 1 << 20, 0, 0};
  auto ref = assign_owners(list, o);
  REQUIRE(ref.is_ok());
  std::mt19937 rng(42);
  for (int trial = 0; trial < 5; ++trial) {
    std::vector<size_t> perm(list.size());
    for (size_t i = 0; i < perm.size(); ++i) perm[i] = i;
    std::shuffle(perm.begin(), perm.end(), rng);
    std::vector<ReplicatedItem> shuffled;
    for (size_t i : perm) shuffled.push_back(list[i]);
    OwnerOptions reversed;  // candidates listed in another order too
    for (int r = 7; r >= 0; --r) {
      reversed.candidates.push_back(r);
      reversed.initial_load.push_back(o.initial_load[r]);
    }
    auto got = assign_owners(shuffled, reversed);
    REQUIRE(got.is_ok());
    for (size_t i = 0; i < perm.size(); ++i) CHECK(got->owner[i] == ref->owner[perm[i]]);
  }
  // Balanced: no rank ends more than the largest item above the least loaded one.
  const auto [lo, hi] = std::minmax_element(ref->final_load.begin(), ref->final_load.end());
  CHECK(*hi - *lo <= uint64_t{16} << 20);
}

TEST_CASE("owners: a replica group, and what is refused", "[shard]") {
  OwnerOptions group;
  group.candidates = {4, 12};
  auto a = assign_owners({{"x", 8 << 20}, {"y", 8 << 20}}, group);
  REQUIRE(a.is_ok());
  CHECK(a->owner == std::vector<int64_t>{4, 12});
  CHECK(assign_owners({}, OwnerOptions{}).status().message() == "assign_owners: no candidate rank");
  group.candidates = {1, 1};
  CHECK(assign_owners({}, group).status().message() ==
        "assign_owners: rank 1 is a candidate twice");
  CHECK(assign_owners({{"x", 1}, {"x", 2}}, ranks(2)).status().message() ==
        "assign_owners: item \"x\" listed twice");
  OwnerOptions loads = ranks(2);
  loads.initial_load = {1};
  CHECK(assign_owners({}, loads).status().code() == Code::kInvalidArgument);
}

}  // namespace
}  // namespace ckpt::store::owner_test
