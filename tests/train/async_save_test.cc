// Checkpointer::save(step, {.blocking = false}): what the file holds is the state at the call
// (training continues while it is written), the snapshot arena is reused, two saves in a row
// without wait() both commit, and a failure in the background comes back from wait() or the
// next save() and is journaled.
#include <torch/torch.h>
#ifndef CATCH_VERSION_MAJOR  // else Catch's, from an earlier file of a unity batch
#undef CHECK                 // glog's CHECK (via libtorch) clashes with Catch's
#endif
#include <catch2/catch.hpp>

#include "ckpt/io/fault_injection_env.h"
#include "ckpt/loader/resumable_sampler.h"
#include "ckpt/sched/scheduler.h"
#include "ckpt/store/journal.h"
#include "ckpt/store/run_dir.h"
#include "tests/common/test_util.h"
#include "train/checkpointer.h"

namespace ckpt::async_save_test {
namespace {

using Dir = testing::TempDir;

struct Training {
  torch::nn::Linear model{torch::nn::LinearOptions(64, 32)};
  torch::optim::AdamW opt{model->parameters(), torch::optim::AdamWOptions(0.1)};
  TrainCounters counters;
  void step() {
    opt.zero_grad();
    model->forward(torch::ones({2, 64})).sum().backward();
    opt.step();
    ++counters.global_step;
  }
  void track(Checkpointer& ck) {
    Tracked t;
    t.model = model.ptr().get();
    t.optimizer = &opt;
    t.counters = &counters;
    ck.track(t);
  }
};

CheckpointerOptions options(const std::string& dir, Env* env = nullptr) {
  CheckpointerOptions o;
  o.run_dir = dir;
  o.keep_last = 0;
  o.env = env;
  return o;
}

const SaveOptions kBackground = [] {
  SaveOptions s;
  s.blocking = false;
  return s;
}();

std::vector<nlohmann::json> save_events(const std::string& run) {
  auto lines = store::read_journal(Env::posix(), run);
  REQUIRE(lines.is_ok());
  std::vector<nlohmann::json> out;
  for (const auto& j : *lines) {
    if (j.value("event", "") == "save") out.push_back(j);
  }
  return out;
}

TEST_CASE("a non-blocking save holds the state at the call, not the steps after it", "[torch]") {
  Dir d;
  Training a;
  for (int i = 0; i < 3; ++i) a.step();
  const torch::Tensor w3 = a.model->weight.detach().clone();
  {
    Checkpointer ck(options(d.path()));
    a.track(ck);
    REQUIRE(ck.save(3, kBackground).is_ok());
    for (int i = 0; i < 3; ++i) a.step();  // in place, while the save is written
    REQUIRE(ck.wait().is_ok());
  }
  REQUIRE_FALSE(torch::equal(a.model->weight, w3));
  Training b;
  Checkpointer ck2(options(d.path()));
  b.track(ck2);
  auto r = ck2.restore_latest();
  REQUIRE(r.is_ok());
  REQUIRE(r->step == 3);
  REQUIRE(torch::equal(b.model->weight, w3));
  REQUIRE(b.counters.global_step == 3);
  // Two save events: taken (with the checkpoint's name) and committed.
  auto ev = save_events(d.path());
  REQUIRE(ev.size() == 2);
  REQUIRE(ev[0]["checkpoint"] == step_dir_name(3));
  REQUIRE(ev[0]["blocking"] == false);
  REQUIRE(ev[1]["committed"] == true);
  REQUIRE_FALSE(ev[1].contains("checkpoint"));
  REQUIRE(ev[1]["stall_seconds"].get<double>() <= ev[1]["seconds"].get<double>());
}

TEST_CASE("two non-blocking saves in a row: both commit, the second waited, one arena", "[torch]") {
  Dir d;
  Training a;
  a.step();
  Checkpointer ck(options(d.path()));
  a.track(ck);
  REQUIRE(ck.save(1, kBackground).is_ok());
  a.step();
  REQUIRE(ck.save(2, kBackground).is_ok());  // no wait() in between
  a.step();
  REQUIRE(ck.save(3, kBackground).is_ok());
  REQUIRE(ck.wait().is_ok());
  const store::BackgroundSaverStats st = ck.background_stats();
  REQUIRE(st.submitted == 3);
  REQUIRE(st.arena_allocations == 1);  // the same state: allocated once, reused
  REQUIRE(st.arena_capacity >= 3 * (64 * 32 + 32) * sizeof(float));
  auto all = store::list_checkpoints(Env::posix(), d.path());
  REQUIRE(all.is_ok());
  REQUIRE(all->size() == 3);
  for (const auto& e : *all) REQUIRE(e.committed);
  REQUIRE(store::find_latest(Env::posix(), d.path())->step == 3);
  int waited = 0;
  for (const auto& e : save_events(d.path())) {
    if (e.contains("waited_for_previous_seconds")) ++waited;
  }
  REQUIRE(waited == 2);
}

TEST_CASE("a fault in the background surfaces on wait() and on the next save", "[torch]") {
  Dir d;
  Training a;
  a.step();
  FaultInjectionEnv env(Env::posix());
  Checkpointer ck(options(d.path(), &env));
  a.track(ck);
  REQUIRE(ck.save(1).is_ok());
  a.step();
  // The journal's "taken" line is the training thread's one operation; the rest is background.
  env.fail_at(env.operations() + 4);
  REQUIRE(ck.save(2, kBackground).is_ok());
  SECTION("wait") {
    Status s = ck.wait();
    REQUIRE_FALSE(s.is_ok());
    REQUIRE(s.message().find("background save of step 2: ") == 0);
    REQUIRE(ck.wait().is_ok());  // returned once
  }
  SECTION("the next save") {
    Status s = ck.save(3, kBackground);
    REQUIRE_FALSE(s.is_ok());
    REQUIRE(s.message().find("background save of step 2: ") == 0);
  }
  REQUIRE(ck.background_stats().failed == 1);
  REQUIRE(store::find_latest(Env::posix(), d.path())->step == 1);
}

TEST_CASE("a background failure is journaled", "[torch]") {
  Dir d;
  Training a;
  a.step();
  Checkpointer ck(options(d.path()));
  a.track(ck);
  REQUIRE(ck.save(1).is_ok());
  // The step directory cannot be created: a file stands where it goes.
  const std::string in_the_way = d.path() + "/" + step_dir_name(2);
  REQUIRE(Env::posix()->write_atomic(in_the_way, "x").is_ok());
  REQUIRE(ck.save(2, kBackground).is_ok());
  REQUIRE_FALSE(ck.wait().is_ok());
  auto ev = save_events(d.path());
  REQUIRE(ev.back()["committed"] == false);
  REQUIRE(ev.back()["step"] == 2);
  REQUIRE(ev.back()["error"].get<std::string>().find(step_dir_name(2)) != std::string::npos);
}

TEST_CASE("the destructor commits the save in flight", "[torch]") {
  Dir d;
  Training a;
  a.step();
  {
    Checkpointer ck(options(d.path()));
    a.track(ck);
    REQUIRE(ck.save(1, kBackground).is_ok());
  }
  REQUIRE(store::find_latest(Env::posix(), d.path())->step == 1);
}

}  // namespace
}  // namespace ckpt::async_save_test
