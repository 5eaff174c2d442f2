// Checkpointer::restore_latest through the fast pipeline (train/checkpointer_restore.cc):
// bytes read in place into the live tensors, all or nothing (a failed restore leaves model,
// optimizer, scheduler, RNG, sampler and counters bitwise unchanged), and the commit record's
// whole-file hash checked.
#include <torch/torch.h>
#ifndef CATCH_VERSION_MAJOR  // else Catch's, from an earlier file of a unity batch
#undef CHECK                 // glog's CHECK (via libtorch) clashes with Catch's
#endif
#include <ATen/CPUGeneratorImpl.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <random>
#include <sstream>

#include "ckpt/format/manifest.h"
#include "ckpt/store/rank_io.h"
#include "ckpt/torch/compat.h"
#include "tests/common/test_util.h"
#include "tests/common/train_fixture.h"
#include "train/checkpointer.h"

namespace ckpt::restore_path_test {
namespace {

using Dir = testing::TempDir;

// A model with tensors from 12 bytes to 1 MiB (larger than a pipeline chunk), trained on random
// inputs, and one user RNG besides what AdamTraining tracks.
struct Training : testing::AdamTraining<torch::nn::Sequential> {
  std::mt19937 user_rng{7};

  explicit Training(int64_t seed)
      : AdamTraining(torch::nn::Sequential(torch::nn::Linear(512, 512), torch::nn::ReLU(),
                                           torch::nn::Linear(512, 3)),
                     0.01) {
    torch::manual_seed(seed);
    reset_params();
  }
  void reset_params() {
    torch::NoGradGuard g;
    for (auto& p : model->parameters()) p.uniform_(-1, 1);
  }
  void step() {
    step_on(torch::rand({2, 512}));
    counters.samples_seen += 4;
    user_rng();
  }
  void track(Checkpointer& ck) {
    AdamTraining::track(ck);
    ck.generators().add("user", &user_rng);
  }
};

std::string bytes_of(const torch::Tensor& t) {
  torch::Tensor c = t.contiguous().cpu();
  return std::string(static_cast<const char*>(c.data_ptr()), c.nbytes());
}

// Everything a restore may change, as bytes.
std::vector<std::string> state_of(Training& t) {
  std::vector<std::string> out;
  for (const auto& p : t.model->parameters()) out.push_back(bytes_of(p));
  for (const auto& p : t.opt.param_groups()[0].params()) {
    auto it = t.opt.state().find(torch_adapter::compat::state_key(p));
    if (it == t.opt.state().end()) {
      out.push_back("no state");
      continue;
    }
    auto& s = static_cast<torch::optim::AdamParamState&>(*it->second);
    out.push_back(bytes_of(s.exp_avg()) + bytes_of(s.exp_avg_sq()) + std::to_string(s.step()));
  }
  out.push_back(std::to_string(t.opt.param_groups()[0].options().get_lr()));
  Node sched;
  t.scheduler.to_node(&sched);
  out.push_back(std::to_string(t.scheduler.last_step()) + " " + std::to_string(sched.attrs.size()));
  out.push_back(bytes_of(at::detail::getDefaultCPUGenerator().get_state()));
  std::ostringstream user;
  user << t.user_rng;
  out.push_back(user.str());
  out.push_back(std::to_string(t.sampler.cursor().epoch) + " " +
                std::to_string(t.sampler.cursor().position));
  out.push_back(std::to_string(t.counters.global_step) + " " +
                std::to_string(t.counters.samples_seen));
  return out;
}

CheckpointerOptions options(const std::string& dir) {
  CheckpointerOptions o;
  o.run_dir = dir;
  return o;
}

// Saves a run of `steps` steps at step `steps`; returns the step directory.
std::string save_run(const std::string& run_dir, int steps) {
  Training a(1);
  for (int i = 0; i < steps; ++i) a.step();
  Checkpointer ck(options(run_dir));
  a.track(ck);
  REQUIRE(ck.save(steps).is_ok());
  return path_join(run_dir, step_dir_name(steps));
}

ManifestEntry last_tensor_of(const std::string& step_dir, const std::string& prefix) {
  auto m = store::read_manifest(Env::posix(), step_dir, 0);
  REQUIRE(m.is_ok());
  ManifestEntry last;
  for (const auto& e : m->tensors) {
    if (e.path.rfind(prefix, 0) == 0 && e.nbytes > 0 && e.offset >= last.offset) last = e;
  }
  REQUIRE(last.nbytes > 0);
  return last;
}

TEST_CASE("restore_latest reads in place into the model's and optimizer's live tensors",
          "[torch]") {
  Dir d;
  save_run(d.path(), 3);
  Training a(1);
  for (int i = 0; i < 3; ++i) a.step();
  Training b(2);
  b.step();  // b's optimizer holds state: it is filled in place
  std::vector<const void*> before;
  for (const auto& p : b.model->parameters()) before.push_back(p.data_ptr());
  for (const auto& p : b.opt.param_groups()[0].params()) {
    auto& s = static_cast<torch::optim::AdamParamState&>(
        *b.opt.state().at(torch_adapter::compat::state_key(p)));
    before.push_back(s.exp_avg().data_ptr());
    before.push_back(s.exp_avg_sq().data_ptr());
  }
  Checkpointer ck(options(d.path()));
  b.track(ck);
  auto r = ck.restore_latest();
  INFO(r.status().to_string());
  REQUIRE(r.is_ok());
  REQUIRE(r->restored);
  std::vector<const void*> after;
  for (const auto& p : b.model->parameters()) after.push_back(p.data_ptr());
  for (const auto& p : b.opt.param_groups()[0].params()) {
    auto& s = static_cast<torch::optim::AdamParamState&>(
        *b.opt.state().at(torch_adapter::compat::state_key(p)));
    after.push_back(s.exp_avg().data_ptr());
    after.push_back(s.exp_avg_sq().data_ptr());
  }
  REQUIRE(after == before);
  REQUIRE(state_of(b) == state_of(a));

  // A fresh optimizer (no state yet) gets fresh tensors with the same bytes.
  Training c(3);
  Checkpointer ck3(options(d.path()));
  c.track(ck3);
  REQUIRE(ck3.restore_latest().is_ok());
  REQUIRE(state_of(c) == state_of(a));
}

TEST_CASE("restore_latest equals store::read_rank, tensor by tensor", "[torch]") {
  Dir d;
  const std::string dir = save_run(d.path(), 2);
  auto ref = store::read_rank(Env::posix(), dir, 0);
  REQUIRE(ref.is_ok());
  Training b(5);
  Checkpointer ck(options(d.path()));
  b.track(ck);
  REQUIRE(ck.restore_latest().is_ok());
  for (const auto& item : b.model->named_parameters()) {
    const Tensor* t = store::find_tensor(&*ref, "/model/" + item.key());
    REQUIRE(t != nullptr);
    REQUIRE(bytes_of(item.value()) == std::string(static_cast<const char*>(t->data), t->nbytes));
  }
}

TEST_CASE("a flipped byte in the optimizer's last tensor leaves every tracked object unchanged",
          "[torch]") {
  for (bool optimizer_has_state : {true, false}) {
    Dir d;
    const std::string dir = save_run(d.path(), 3);
    const ManifestEntry last = last_tensor_of(dir, "/optimizer/");
    testing::flip_bits(path_join(dir, rank_file_name(0)), last.offset + last.nbytes - 1, 0x01);
    Training b(2);
    if (optimizer_has_state) b.step();
    const std::vector<std::string> before = state_of(b);
    Checkpointer ck(options(d.path()));
    b.track(ck);
    auto r = ck.restore_latest();
    INFO(r.status().to_string());
    REQUIRE(r.status().code() == Code::kCorrupt);
    REQUIRE(r.status().message().find("tensor \"" + last.path + "\" in ") != std::string::npos);
    REQUIRE(r.status().message().find("xxh3 mismatch") != std::string::npos);
    REQUIRE(state_of(b) == before);
  }
}

TEST_CASE("a failure after the bytes landed undoes the model, optimizer and RNG", "[torch]") {
  Dir d;
  {
    Training a(1);
    a.step();
    int64_t tag = 5;
    Checkpointer ck(options(d.path()));
    a.track(ck);
    ck.extra().add("tag", &tag);
    REQUIRE(ck.save(1).is_ok());
  }
  Training b(2);
  b.step();
  double tag = 0;  // registered with another type: refused after the pipeline read everything
  const std::vector<std::string> before = state_of(b);
  Checkpointer ck(options(d.path()));
  b.track(ck);
  ck.extra().add("tag", &tag);
  auto r = ck.restore_latest();
  INFO(r.status().to_string());
  REQUIRE(r.status().code() == Code::kMismatch);
  REQUIRE(r.status().message().find("extra value \"tag\"") != std::string::npos);
  REQUIRE(state_of(b) == before);
}

TEST_CASE("a flipped byte in HDF5 padding is refused by the whole-file hash, naming the file",
          "[torch]") {
  Dir d;
  const std::string dir = save_run(d.path(), 3);
  auto m = store::read_manifest(Env::posix(), dir, 0);
  REQUIRE(m.is_ok());
  std::vector<ManifestEntry> t = m->tensors;
  std::sort(t.begin(), t.end(), [](auto& x, auto& y) { return x.offset < y.offset; });
  uint64_t pad = 0;
  for (size_t i = 1; i < t.size() && pad == 0; ++i) {
    const uint64_t end = t[i - 1].offset + t[i - 1].nbytes;
    if (t[i - 1].nbytes > 0 && t[i].offset > end) pad = end;
  }
  REQUIRE(pad != 0);
  const std::string file = path_join(dir, rank_file_name(0));
  testing::flip_bits(file, pad, 0x01);
  REQUIRE(store::read_rank(Env::posix(), dir, 0).is_ok());  // every tensor still matches
  Training b(2);
  b.step();
  const std::vector<std::string> before = state_of(b);
  Checkpointer ck(options(d.path()));
  b.track(ck);
  auto r = ck.restore_latest();
  INFO(r.status().to_string());
  REQUIRE(r.status().code() == Code::kCorrupt);
  REQUIRE(r.status().message().find(file + ": whole-file xxh3 mismatch") != std::string::npos);
  REQUIRE(state_of(b) == before);
}

TEST_CASE("a truncated rank file is refused by restore_latest, naming the file", "[torch]") {
  Dir d;
  const std::string dir = save_run(d.path(), 1);
  const std::string file = path_join(dir, rank_file_name(0));
  auto size = Env::posix()->file_size(file);
  REQUIRE(size.is_ok());
  REQUIRE(::truncate(file.c_str(), static_cast<off_t>(*size / 2)) == 0);
  Training b(2);
  const std::vector<std::string> before = state_of(b);
  Checkpointer ck(options(d.path()));
  b.track(ck);
  auto r = ck.restore_latest();
  INFO(r.status().to_string());
  REQUIRE_FALSE(r.is_ok());
  REQUIRE(r.status().message().find("rank-00000.h5") != std::string::npos);
  REQUIRE(state_of(b) == before);
}

}  // namespace
}  // namespace ckpt::restore_path_test
