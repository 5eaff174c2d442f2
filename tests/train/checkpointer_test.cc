// The library API directly: fresh starts, required components, refusals that name the tensor,
// and what a restore without optimizer state leaves behind (zero moments).
#include <torch/torch.h>
#ifndef CATCH_VERSION_MAJOR  // else Catch's, from an earlier file of a unity batch
#undef CHECK                 // glog's CHECK (via libtorch) clashes with Catch's
#endif
#include <catch2/catch.hpp>

#include "ckpt/format/manifest.h"
#include "ckpt/store/rank_io.h"
#include "ckpt/torch/compat.h"
#include "tests/common/test_util.h"
#include "tests/common/train_fixture.h"
#include "train/checkpointer.h"

namespace ckpt::checkpointer_test {
namespace {

using Dir = testing::TempDir;

// A 4 -> 3 Linear trained on ones.
struct Training : testing::AdamTraining<torch::nn::Linear> {
  Training() : AdamTraining(torch::nn::Linear(torch::nn::LinearOptions(4, 3)), 0.1) {}
  void step() { step_on(torch::ones({2, 4})); }
};

CheckpointerOptions options(const std::string& dir) {
  CheckpointerOptions o;
  o.run_dir = dir;
  return o;
}

TEST_CASE("restore_latest on an empty run directory is a fresh start", "[torch]") {
  Dir d;
  Training t;
  Checkpointer ck(options(d.path()));
  t.track(ck);
  auto r = ck.restore_latest();
  REQUIRE(r.is_ok());
  REQUIRE_FALSE(r->restored);
}

TEST_CASE("save then restore brings back every tracked component", "[torch]") {
  Dir d;
  Training a;
  for (int i = 0; i < 3; ++i) a.step();
  Checkpointer ck(options(d.path()));
  a.track(ck);
  REQUIRE(ck.save(3).is_ok());
  Training b;
  Checkpointer ck2(options(d.path()));
  b.track(ck2);
  auto r = ck2.restore_latest();
  REQUIRE(r.is_ok());
  REQUIRE(r->restored);
  REQUIRE(r->step == 3);
  REQUIRE(r->missing.empty());
  REQUIRE(torch::equal(a.model->weight, b.model->weight));
  REQUIRE(b.counters.global_step == 3);
  REQUIRE(b.sampler.cursor() == a.sampler.cursor());
  REQUIRE(b.scheduler.last_step() == 3);
}

TEST_CASE("without optimizer state the moments restart from zero", "[torch]") {
  Dir d;
  Training a;
  for (int i = 0; i < 3; ++i) a.step();
  CheckpointerOptions o = options(d.path());
  o.omit = {Component::kOptimizer};
  Checkpointer ck(o);
  a.track(ck);
  REQUIRE(ck.save(3).is_ok());
  Training b;
  Checkpointer ck2(options(d.path()));
  b.track(ck2);
  auto r = ck2.restore_latest();
  REQUIRE(r.is_ok());
  REQUIRE((r->missing == std::set<Component>{Component::kOptimizer}));
  REQUIRE(b.opt.state().empty());
  // One step later Adam's first moment is exactly (1 - beta1) * grad: it started from zero.
  b.opt.zero_grad();
  b.model->forward(torch::ones({2, 4})).sum().backward();
  torch::Tensor grad = b.model->weight.grad().clone();
  b.opt.step();
  auto& st = static_cast<torch::optim::AdamParamState&>(
      *b.opt.state().at(torch_adapter::compat::state_key(b.model->weight)));
  REQUIRE(st.step() == 1);
  REQUIRE(torch::allclose(st.exp_avg(), (1 - 0.9) * grad));
}

TEST_CASE("a required component that is missing is refused before anything changes", "[torch]") {
  Dir d;
  Training a;
  a.step();
  CheckpointerOptions o = options(d.path());
  o.omit = {Component::kScheduler};
  Checkpointer ck(o);
  a.track(ck);
  REQUIRE(ck.save(1).is_ok());
  Training b;
  torch::Tensor before = b.model->weight.clone();
  CheckpointerOptions o2 = options(d.path());
  o2.required = {Component::kScheduler};
  Checkpointer ck2(o2);
  b.track(ck2);
  auto r = ck2.restore_latest();
  REQUIRE(r.status().code() == Code::kNotFound);
  REQUIRE(r.status().message().find("required component \"scheduler\"") != std::string::npos);
  REQUIRE(torch::equal(before, b.model->weight));
}

TEST_CASE("a model of another shape is refused, naming the tensor", "[torch]") {
  Dir d;
  Training a;
  Checkpointer ck(options(d.path()));
  a.track(ck);
  REQUIRE(ck.save(0).is_ok());
  torch::nn::Linear other(torch::nn::LinearOptions(4, 5));
  torch::optim::Adam opt(other->parameters());
  Checkpointer ck2(options(d.path()));
  Tracked only_model_and_opt;
  only_model_and_opt.model = other.ptr().get();
  only_model_and_opt.optimizer = &opt;
  ck2.track(only_model_and_opt);
  auto r = ck2.restore_latest();
  REQUIRE_FALSE(r.is_ok());
  REQUIRE(r.status().message().find("\"weight\"") != std::string::npos);
  REQUIRE(r.status().message().find("rank-00000.h5") != std::string::npos);
}

TEST_CASE("a flipped byte in a parameter is refused, naming file and tensor", "[torch]") {
  Dir d;
  Training a;
  Checkpointer ck(options(d.path()));
  a.track(ck);
  REQUIRE(ck.save(0).is_ok());
  const std::string dir = d.path() + "/" + step_dir_name(0);
  auto m = store::read_manifest(Env::posix(), dir, 0);
  REQUIRE(m.is_ok());
  uint64_t offset = 0;
  for (const auto& e : m->tensors) {
    if (e.path == "/model/weight") offset = e.offset;
  }
  REQUIRE(offset != 0);
  testing::flip_bits(dir + "/rank-00000.h5", offset + 5, 0x10);
  Training b;
  Checkpointer ck2(options(d.path()));
  b.track(ck2);
  auto r = ck2.restore_latest();
  REQUIRE(r.status().code() == Code::kCorrupt);
  REQUIRE(r.status().message().find("tensor \"/model/weight\" in ") != std::string::npos);
  REQUIRE(r.status().message().find("xxh3 mismatch") != std::string::npos);
}

}  // namespace
}  // namespace ckpt::checkpointer_test
