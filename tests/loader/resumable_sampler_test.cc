#include "ckpt/loader/resumable_sampler.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdint>
#include <stdexcept>
#include <vector>

namespace ckpt::loader::resumable_sampler_test {
namespace {

SamplerSpec make_spec(uint64_t n, uint32_t world, uint32_t batch, bool drop_last = false,
                      bool shuffle = true) {
  SamplerSpec s;
  s.dataset_size = n;
  s.dataset_fingerprint = "test-dataset";
  s.seed = 1234;
  s.shuffle = shuffle;
  s.drop_last = drop_last;
  s.world_size = world;
  s.batch_size = batch;
  return s;
}

std::vector<ResumableSampler> ranks_of(const SamplerSpec& spec) {
  std::vector<ResumableSampler> out;
  for (uint32_t r = 0; r < spec.world_size; ++r) out.emplace_back(spec, r);
  return out;
}

// One global step across all ranks: the ids each rank gets, concatenated.
std::vector<uint64_t> global_step(std::vector<ResumableSampler>& ranks) {
  std::vector<uint64_t> all;
  for (auto& r : ranks) {
    auto ids = r.next_batch();
    all.insert(all.end(), ids.begin(), ids.end());
  }
  return all;
}

TEST_CASE("Sampler: one epoch across ranks visits every sample once, then rolls over", "[loader]") {
  const auto spec = make_spec(103, 4, 5);  // G = 20: 5 full steps and a short one of 3
  auto ranks = ranks_of(spec);
  REQUIRE(ranks[0].steps_per_epoch() == 6);
  std::vector<int> visits(103, 0);
  for (uint64_t step = 0; step < 6; ++step) {
    for (auto& r : ranks) REQUIRE(r.cursor() == LoaderCursor{0, step * 20});
    auto ids = global_step(ranks);
    REQUIRE(ids.size() == (step < 5 ? 20u : 3u));
    for (uint64_t id : ids) ++visits[id];
  }
  for (int v : visits) REQUIRE(v == 1);
  for (auto& r : ranks) REQUIRE(r.cursor() == LoaderCursor{1, 0});
  // The order of epoch 1 is not that of epoch 0.
  REQUIRE(ranks[0].batch_at({1, 0}, 0) != ranks[0].batch_at({0, 0}, 0));
}

TEST_CASE("Sampler: position g goes to rank g mod W, ids through the epoch's order", "[loader]") {
  const auto spec = make_spec(50, 3, 4);
  ResumableSampler s(spec, 1);
  const auto order = epoch_order(spec, 2);
  // A cursor that is not a multiple of G or W, as after a reshard.
  const LoaderCursor c{2, 7};
  REQUIRE(s.positions_at(c, 1) == std::vector<uint64_t>{7, 10, 13, 16});
  REQUIRE(s.positions_at(c, 0) == std::vector<uint64_t>{9, 12, 15, 18});
  REQUIRE(s.positions_at(c, 2) == std::vector<uint64_t>{8, 11, 14, 17});
  std::vector<uint64_t> expected;
  for (uint64_t g : {7, 10, 13, 16}) expected.push_back(order.at(g));
  REQUIRE(s.batch_at(c, 1) == expected);
}

TEST_CASE("Sampler: the short last step without drop_last", "[loader]") {
  ResumableSampler s(make_spec(10, 4, 2), 0);  // G = 8: positions 8, 9 remain in step 2
  REQUIRE(s.positions_at({0, 8}, 0) == std::vector<uint64_t>{8});
  REQUIRE(s.positions_at({0, 8}, 1) == std::vector<uint64_t>{9});
  REQUIRE(s.positions_at({0, 8}, 2).empty());
  REQUIRE(s.positions_at({0, 8}, 3).empty());
}

TEST_CASE("Sampler: drop_last drops the tail that does not fill a global batch", "[loader]") {
  const auto spec = make_spec(103, 4, 5, /*drop_last=*/true);
  auto ranks = ranks_of(spec);
  REQUIRE(ranks[0].steps_per_epoch() == 5);
  std::vector<int> visits(103, 0);
  for (int step = 0; step < 5; ++step) {
    auto ids = global_step(ranks);
    REQUIRE(ids.size() == 20u);
    for (uint64_t id : ids) ++visits[id];
  }
  REQUIRE(ranks[0].cursor() == LoaderCursor{1, 0});
  const auto order = epoch_order(spec, 0);
  for (uint64_t g = 0; g < 103; ++g) REQUIRE(visits[order.at(g)] == (g < 100 ? 1 : 0));
  // A cursor inside the dropped tail is an epoch end: next_batch starts epoch 1.
  ranks[0].set_cursor({0, 100});
  REQUIRE(ranks[0].at_epoch_end({0, 100}));
  REQUIRE(ranks[0].next_batch() == ranks[0].batch_at({1, 0}, 0));
  REQUIRE(ranks[0].cursor() == LoaderCursor{1, 20});
}

TEST_CASE("Sampler: mid-epoch resume yields the identical remaining sequence", "[loader]") {
  const auto spec = make_spec(1000, 2, 7);
  ResumableSampler uninterrupted(spec, 1);
  std::vector<std::vector<uint64_t>> reference;
  for (int i = 0; i < 200; ++i) reference.push_back(uninterrupted.next_batch());  // > 2 epochs

  ResumableSampler first(spec, 1);
  for (int i = 0; i < 37; ++i) REQUIRE(first.next_batch() == reference[i]);
  const LoaderCursor saved = first.cursor();
  REQUIRE(saved == LoaderCursor{0, 37 * 14});
  auto resumed = ResumableSampler::create(spec, 1, saved);
  REQUIRE(resumed.is_ok());
  for (int i = 37; i < 200; ++i) REQUIRE(resumed->next_batch() == reference[i]);
  REQUIRE(resumed->cursor() == uninterrupted.cursor());
}

TEST_CASE("Sampler: reshard 2 -> 3 mid-epoch visits each remaining sample exactly once",
          "[loader]") {
  const uint64_t n = 1009;
  const auto spec = make_spec(n, 2, 8);
  auto old_ranks = ranks_of(spec);
  std::vector<int> visits(n, 0);
  for (int i = 0; i < 13; ++i) {
    for (uint64_t id : global_step(old_ranks)) ++visits[id];
  }
  REQUIRE(old_ranks[0].cursor() == LoaderCursor{0, 13 * 16});

  std::vector<ResumableSampler> new_ranks;
  for (uint32_t r = 0; r < 3; ++r)
    new_ranks.push_back(ResumableSampler::reshard(old_ranks[0], 3, r));
  REQUIRE(new_ranks[2].spec().world_size == 3);
  REQUIRE(new_ranks[2].cursor() == old_ranks[0].cursor());
  while (new_ranks[0].cursor().epoch == 0) {
    auto ids = global_step(new_ranks);
    REQUIRE(ids.size() <= 24u);
    for (uint64_t id : ids) ++visits[id];
  }
  for (uint64_t id = 0; id < n; ++id) REQUIRE(visits[id] == 1);
  for (auto& r : new_ranks) REQUIRE(r.cursor() == LoaderCursor{1, 0});
}

TEST_CASE("Sampler: shuffle = false is the identity order", "[loader]") {
  ResumableSampler s(make_spec(10, 2, 2, false, /*shuffle=*/false), 0);
  REQUIRE(s.next_batch() == std::vector<uint64_t>{0, 2});
  REQUIRE(s.next_batch() == std::vector<uint64_t>{4, 6});
  REQUIRE(s.next_batch() == std::vector<uint64_t>{8});
  REQUIRE(s.cursor() == LoaderCursor{1, 0});
  REQUIRE(s.next_batch() == std::vector<uint64_t>{0, 2});  // every epoch alike
}

TEST_CASE("Sampler: invalid specs, ranks and cursors are refused", "[loader]") {
  REQUIRE_FALSE(ResumableSampler::create(make_spec(0, 1, 1), 0).is_ok());
  REQUIRE_FALSE(ResumableSampler::create(make_spec(10, 0, 1), 0).is_ok());
  REQUIRE_FALSE(ResumableSampler::create(make_spec(10, 1, 0), 0).is_ok());
  auto too_big = ResumableSampler::create(make_spec(10, 4, 3, /*drop_last=*/true), 0);
  REQUIRE_FALSE(too_big.is_ok());
  REQUIRE(too_big.status().message().find("drop_last") != std::string::npos);
  auto bad_rank = ResumableSampler::create(make_spec(10, 2, 1), 2);
  REQUIRE_FALSE(bad_rank.is_ok());
  REQUIRE(bad_rank.status().message() == "sampler: rank 2 outside [0, 2) (world_size)");
  REQUIRE_FALSE(ResumableSampler::create(make_spec(10, 2, 1), 0, {0, 11}).is_ok());
  REQUIRE_THROWS_AS(ResumableSampler(make_spec(10, 2, 1), 5), std::invalid_argument);
  ResumableSampler s(make_spec(10, 2, 1), 0);
  REQUIRE_THROWS_AS(s.set_cursor({0, 11}), std::invalid_argument);
  REQUIRE_THROWS_AS(s.batch_at({0, 0}, 2), std::invalid_argument);
  REQUIRE_THROWS_AS(ResumableSampler::reshard(s, 0, 0), std::invalid_argument);
}

}  // namespace
}  // namespace ckpt::loader::resumable_sampler_test

namespace ckpt::loader::resumable_sampler_test {
namespace {

// Runs all ranks of `ranks` until the epoch of rank 0's cursor changes; counts visits.
void finish_epoch(std::vector<ResumableSampler>& ranks, std::vector<int>* visits) {
  const uint64_t epoch = ranks[0].cursor().epoch;
  while (ranks[0].cursor().epoch == epoch) {
    for (uint64_t id : global_step(ranks)) ++(*visits)[id];
  }
}

TEST_CASE("Sampler: reshard 3 -> 2 and with drop_last", "[loader]") {
  const uint64_t n = 500;
  auto spec = make_spec(n, 3, 7, /*drop_last=*/true);  // G = 21
  auto ranks = ranks_of(spec);
  std::vector<int> visits(n, 0);
  for (int i = 0; i < 9; ++i) {
    for (uint64_t id : global_step(ranks)) ++visits[id];
  }
  const LoaderCursor at_reshard = ranks[0].cursor();
  REQUIRE(at_reshard == LoaderCursor{0, 189});
  std::vector<ResumableSampler> smaller;
  for (uint32_t r = 0; r < 2; ++r) smaller.push_back(ResumableSampler::reshard(ranks[1], 2, r));
  finish_epoch(smaller, &visits);
  // G = 14 now: from 189, (500 - 189) / 14 = 22 full steps reach 497; 497..499 are dropped.
  const auto order = epoch_order(spec, 0);
  for (uint64_t g = 0; g < n; ++g) {
    INFO("position " << g);
    REQUIRE(visits[order.at(g)] == (g < 497 ? 1 : 0));
  }
}

TEST_CASE("Sampler: resume through a cursor at the epoch end and across epochs", "[loader]") {
  const auto spec = make_spec(40, 2, 5);  // G = 10: exactly 4 steps
  ResumableSampler s(spec, 0);
  for (int i = 0; i < 4; ++i) s.next_batch();
  REQUIRE(s.cursor() == LoaderCursor{1, 0});
  // {0, 40} is the same place as {1, 0}.
  auto at_end = ResumableSampler::create(spec, 0, {0, 40});
  REQUIRE(at_end.is_ok());
  REQUIRE(at_end->at_epoch_end({0, 40}));
  REQUIRE(at_end->remaining_steps({0, 40}) == 0);
  REQUIRE(at_end->batch_at({0, 40}, 0).empty());
  REQUIRE(at_end->next_batch() == s.next_batch());
  REQUIRE(at_end->cursor() == s.cursor());
}

TEST_CASE("Sampler: 10^9 samples, resume near the end of an epoch", "[loader]") {
  const uint64_t n = 1000000000;
  const auto spec = make_spec(n, 64, 512);  // G = 32768
  ResumableSampler s(spec, 17);
  REQUIRE(s.steps_per_epoch() == (n + 32767) / 32768);
  const uint64_t last_start = (s.steps_per_epoch() - 1) * 32768;
  s.set_cursor({4, last_start});
  REQUIRE(s.remaining_steps(s.cursor()) == 1);
  const auto ids = s.next_batch();
  // n - last_start = 18944 positions remain; rank 17 takes those = 17 mod 64: 296 of them.
  REQUIRE(ids.size() == 296u);
  for (uint64_t id : ids) REQUIRE(id < n);
  REQUIRE(s.cursor() == LoaderCursor{5, 0});
}

}  // namespace
}  // namespace ckpt::loader::resumable_sampler_test
