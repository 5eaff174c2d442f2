// Checkpointer with LocalShards (a libtorch program that shards by hand, format version 2): two
// ranks (threads, a shared barrier) save halves of a tensor and a replica written once; restores
// at one rank (whole) and at three ranks (other splits) give the same values, every box checked
// first; a lost rank file is refused with nothing live changed.
#include <torch/torch.h>
#ifndef CATCH_VERSION_MAJOR  // else Catch's, from an earlier file of a unity batch
#undef CHECK                 // glog's CHECK (via libtorch) clashes with Catch's
#endif
#include <catch2/catch.hpp>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <thread>

#include "ckpt/store/run_dir.h"
#include "resume/reshard_read.h"
#include "tests/common/test_util.h"
#include "train/checkpointer.h"

namespace ckpt::local_shard_test {
namespace {

using Dir = testing::TempDir;

class ThreadBarrier {
 public:
  explicit ThreadBarrier(int n) : n_(n) {}
  Status wait() {
    std::unique_lock<std::mutex> lock(m_);
    const int gen = gen_;
    if (++count_ == n_) {
      count_ = 0;
      ++gen_;
      cv_.notify_all();
    } else {
      cv_.wait(lock, [&] { return gen != gen_; });
    }
    return Status::ok();
  }

 private:
  std::mutex m_;
  std::condition_variable cv_;
  int n_, count_ = 0, gen_ = 0;
};

const torch::Tensor kWeight = torch::arange(60, torch::kFloat32).reshape({10, 6});
const torch::Tensor kBias = torch::arange(6, torch::kFloat64);

CheckpointerOptions options(const std::string& dir, int64_t rank, int64_t world, ThreadBarrier* b) {
  CheckpointerOptions o;
  o.run_dir = dir;
  o.keep_last = 0;
  o.rank = rank;
  o.world_size = world;
  if (b != nullptr) o.barrier = [b] { return b->wait(); };
  return o;
}

// Rank r of 2: rows [5r, 5r + 5) of "w"; "b" replicated, written by rank 1.
void save_rank(const std::string& dir, int64_t rank, ThreadBarrier* barrier) {
  torch::nn::Linear model(torch::nn::LinearOptions(2, 2));
  torch::Tensor w = kWeight.slice(0, 5 * rank, 5 * rank + 5).contiguous();
  torch::Tensor b = kBias.clone();
  std::vector<LocalShard> shards = {{"w", &w, {10, 6}, {5 * rank, 0}, false, 0},
                                    {"b", &b, {6}, {0}, true, 1}};
  Checkpointer ck(options(dir, rank, 2, barrier));
  Tracked t;
  t.model = model.ptr().get();
  t.shards = &shards;
  ck.track(t);
  REQUIRE(ck.save(3).is_ok());
}

void save_two_ranks(const std::string& dir) {
  ThreadBarrier barrier(2);
  std::thread r1([&] { save_rank(dir, 1, &barrier); });
  save_rank(dir, 0, &barrier);
  r1.join();
}

Result<RestoreReport> restore(const std::string& dir, int64_t rank, int64_t world, torch::Tensor* w,
                              int64_t row, torch::Tensor* b) {
  torch::nn::Linear model(torch::nn::LinearOptions(2, 2));
  std::vector<LocalShard> shards = {{"w", w, {10, 6}, {row, 0}, false, 0},
                                    {"b", b, {6}, {0}, true, 1}};
  Checkpointer ck(options(dir, rank, world, nullptr));
  Tracked t;
  t.model = model.ptr().get();
  t.shards = &shards;
  ck.track(t);
  return ck.restore_latest();
}

TEST_CASE("LocalShards saved at 2 ranks restore whole at 1 and split at 3", "[torch][shard]") {
  Dir d;
  save_two_ranks(d.path());
  const std::string step = d.path() + "/step-000000000003";
  auto index = resume::read_step_index(Env::posix(), step);
  REQUIRE(index.is_ok());
  REQUIRE(index->find_tensor("/shards/b") >= 0);
  // the replica is written once, by its owner
  CHECK(index->tensor(static_cast<size_t>(index->find_tensor("/shards/b"))).box_count == 1);

  torch::Tensor w = torch::zeros({10, 6}), b = torch::zeros({6}, torch::kFloat64);
  auto rep = restore(d.path(), 0, 1, &w, 0, &b);
  REQUIRE(rep.is_ok());
  CHECK(rep->shards == 2);
  CHECK(torch::equal(w, kWeight));
  CHECK(torch::equal(b, kBias));

  const int64_t rows[] = {0, 4, 8, 10};
  for (int64_t r = 0; r < 3; ++r) {
    torch::Tensor part = torch::zeros({rows[r + 1] - rows[r], 6});
    torch::Tensor bias = torch::zeros({6}, torch::kFloat64);
    auto got = restore(d.path(), r, 3, &part, rows[r], &bias);
    REQUIRE(got.is_ok());
    CHECK(torch::equal(part, kWeight.slice(0, rows[r], rows[r + 1])));
    CHECK(torch::equal(bias, kBias));
  }
}

TEST_CASE("a lost rank file refuses the LocalShards with nothing live changed", "[torch][shard]") {
  Dir d;
  save_two_ranks(d.path());
  REQUIRE(std::remove((d.path() + "/step-000000000003/rank-00001.h5").c_str()) == 0);
  torch::Tensor w = torch::zeros({10, 6}), b = torch::zeros({6}, torch::kFloat64);
  torch::nn::Linear model(torch::nn::LinearOptions(2, 2));
  const torch::Tensor before = model->weight.clone();
  std::vector<LocalShard> shards = {{"w", &w, {10, 6}, {0, 0}, false, 0},
                                    {"b", &b, {6}, {0}, true, 1}};
  Checkpointer ck(options(d.path(), 0, 1, nullptr));
  Tracked t;
  t.model = model.ptr().get();
  t.shards = &shards;
  ck.track(t);
  auto rep = ck.restore_latest();
  REQUIRE(rep.status().code() == Code::kCorrupt);
  CHECK_THAT(rep.status().message(),
             Catch::Contains("tensor \"/shards/w\" loses 30 of 60 elements: [5:10, 0:6]"));
  CHECK_THAT(rep.status().message(), Catch::Contains("tensor \"/shards/b\" loses all 6 of 6"));
  CHECK(torch::equal(w, torch::zeros({10, 6})));
  CHECK(torch::equal(model->weight, before));
}

TEST_CASE("a LocalShard outside its tensor is refused at save", "[torch][shard]") {
  Dir d;
  torch::nn::Linear model(torch::nn::LinearOptions(2, 2));
  torch::Tensor w = torch::zeros({6, 6});
  std::vector<LocalShard> shards = {{"w", &w, {10, 6}, {5, 0}, false, 0}};
  Checkpointer ck(options(d.path(), 0, 1, nullptr));
  Tracked t;
  t.model = model.ptr().get();
  t.shards = &shards;
  ck.track(t);
  Status s = ck.save(1);
  REQUIRE(s.code() == Code::kInvalidArgument);
  CHECK_THAT(s.message(), Catch::Contains("save: shard \"w\": box [5:11) along dimension 0 is "
                                          "outside the tensor's extent 10"));
}

}  // namespace
}  // namespace ckpt::local_shard_test
