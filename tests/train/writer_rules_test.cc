// Issue 27, the Checkpointer's side: a re-save replaces a committed step whole; a step out of
// range writes nothing; two Checkpointers of one process saving non-blocking at once take turns;
// a deleted run directory fails the next save instead of being re-created without its lock; a
// read-only Checkpointer restores from a run another process holds.
#include <signal.h>
#include <sys/wait.h>
#include <torch/torch.h>
#include <unistd.h>
#ifndef CATCH_VERSION_MAJOR  // else Catch's, from an earlier file of a unity batch
#undef CHECK                 // glog's CHECK (via libtorch) clashes with Catch's
#endif
#include <catch2/catch.hpp>

#include "ckpt/format/manifest.h"
#include "ckpt/store/rank_io.h"
#include "ckpt/store/run_dir.h"
#include "tests/common/commit_reads.h"
#include "tests/common/test_util.h"
#include "tests/common/train_fixture.h"
#include "train/checkpointer.h"

namespace ckpt::writer_rules_test {
namespace {

using Dir = testing::TempDir;

// 256 -> 1024: 1 MiB of weights plus Adam's moments, so two saves at once overlap in time.
struct Training : testing::AdamTraining<torch::nn::Linear> {
  Training() : AdamTraining(torch::nn::Linear(torch::nn::LinearOptions(256, 1024)), 0.01) {}
  void step() { step_on(torch::ones({2, 256})); }
};

SaveOptions in_background(bool yes = true) {
  SaveOptions s;
  s.blocking = !yes;
  return s;
}

CheckpointerOptions options(const std::string& dir) {
  CheckpointerOptions o;
  o.run_dir = dir;
  o.keep_last = 0;
  return o;
}

void require_every_checkpoint_intact(const std::string& run) {
  auto all = store::list_checkpoints(Env::posix(), run);
  REQUIRE(all.is_ok());
  REQUIRE_FALSE(all->empty());
  for (const auto& e : *all) {
    INFO(e.dir << ": " << e.problem);
    REQUIRE(e.committed);
    const auto rep = store::verify_checkpoint(Env::posix(), e.dir);
    for (const auto& p : rep.problems) INFO(p);
    REQUIRE(rep.problems.empty());
  }
}

TEST_CASE("re-saving a committed step replaces it whole", "[torch]") {
  Dir d;
  Training a;
  a.step();
  {
    Checkpointer ck(options(d.path()));
    a.track(ck);
    REQUIRE(ck.save(1).is_ok());
    a.step();  // other weights, saved under the same step
    REQUIRE(ck.save(1).is_ok());
    REQUIRE(ck.save(1, in_background()).is_ok());
    REQUIRE(ck.wait().is_ok());
  }
  require_every_checkpoint_intact(d.path());
  REQUIRE_FALSE(Env::posix()->exists(store::resave_dir(d.path(), 1)));
  Training b;
  Checkpointer ck(options(d.path()));
  b.track(ck);
  auto r = ck.restore_latest();
  REQUIRE(r.is_ok());
  REQUIRE(r->step == 1);
  REQUIRE(torch::equal(a.model->weight, b.model->weight));
}

TEST_CASE("save refuses a step outside 0..999999999999 before writing", "[torch]") {
  Dir d;
  Training a;
  Checkpointer ck(options(d.path()));
  a.track(ck);
  REQUIRE(ck.save(5).is_ok());
  for (int64_t bad : {kMaxStep + 1, int64_t{-1}}) {
    for (bool blocking : {true, false}) {
      const Status s = ck.save(bad, in_background(!blocking));
      REQUIRE(s.code() == Code::kInvalidArgument);
      REQUIRE(s.message().find("step " + std::to_string(bad) + " is out of range") !=
              std::string::npos);
      REQUIRE(ck.wait().is_ok());
    }
  }
  REQUIRE(testing::read_file(d.path() + "/LATEST") == step_dir_name(5) + "\n");
  REQUIRE(store::list_checkpoints(Env::posix(), d.path())->size() == 1);
  REQUIRE(ck.save(kMaxStep).is_ok());  // the largest step is a checkpoint like any other
  REQUIRE(store::find_latest(Env::posix(), d.path())->step == kMaxStep);
}

TEST_CASE("two Checkpointers of one process saving at once take turns", "[torch]") {
  Dir d;
  Training a, b;
  b.step();
  Checkpointer first(options(d.path()));
  Checkpointer second(options(d.path()));
  a.track(first);
  b.track(second);
  for (int64_t step = 10; step <= 40; step += 10) {
    // The same step from both (the case), then different steps.
    REQUIRE(first.save(step, in_background()).is_ok());
    REQUIRE(second.save(step + (step > 20 ? 1 : 0), in_background()).is_ok());
    REQUIRE(first.wait().is_ok());
    REQUIRE(second.wait().is_ok());
  }
  require_every_checkpoint_intact(d.path());
  REQUIRE(store::find_latest(Env::posix(), d.path())->step == 41);
}

TEST_CASE("a run directory deleted under the writer fails its next save", "[torch]") {
  Dir d;
  const std::string run = d.path() + "/run";
  Training a;
  Checkpointer ck(options(run));
  a.track(ck);
  REQUIRE(ck.save(1).is_ok());
  REQUIRE(Env::posix()->remove_tree(run).is_ok());  // rm -rf of the "old" run
  for (bool blocking : {true, false}) {
    const Status s = ck.save(2, in_background(!blocking));
    REQUIRE(s.code() == Code::kIoError);
    REQUIRE(s.message().find("the run directory was removed or replaced") != std::string::npos);
    REQUIRE_FALSE(Env::posix()->exists(run));  // not re-created without its lock
  }
  // A relaunch takes a fresh lock there; the old writer still may not write.
  REQUIRE(Env::posix()->make_dirs(run).is_ok());
  Training b;
  Checkpointer relaunch(options(run));
  b.track(relaunch);
  REQUIRE(relaunch.save(3).is_ok());
  REQUIRE_FALSE(ck.save(4).is_ok());
  REQUIRE(store::find_latest(Env::posix(), run)->step == 3);
}

TEST_CASE("restore_latest reads one commit record however many checkpoints are kept", "[torch]") {
  Dir d;
  Training a;
  {
    Checkpointer ck(options(d.path()));
    a.track(ck);
    for (int64_t step = 1; step <= 6; ++step) {
      a.step();
      REQUIRE(ck.save(step).is_ok());
    }
  }
  testing::CommitReads counting(Env::posix());
  CheckpointerOptions o = options(d.path());
  o.env = &counting;
  Training b;
  Checkpointer ck(o);
  b.track(ck);
  auto rep = ck.restore_latest();
  REQUIRE(rep.is_ok());
  REQUIRE(rep->step == 6);
  // find_latest's read of step 6 serves the restore; before, the damaged-checkpoint check read
  // every record kept and the restore read the newest twice more: 8
  CHECK(counting.reads == 1);
}

TEST_CASE("a read-only Checkpointer restores a run another process holds, writing nothing",
          "[torch]") {
  Dir d;
  Training a;
  a.step();
  {
    Checkpointer ck(options(d.path()));
    a.track(ck);
    REQUIRE(ck.save(1).is_ok());
  }
  int ready[2];
  REQUIRE(pipe(ready) == 0);
  const pid_t writer = fork();  // the live training job: holds RUN/LOCK
  if (writer == 0) {
    auto lock = store::lock_run_dir(Env::posix(), d.path());
    const char c = lock.is_ok() ? 'y' : 'n';
    if (write(ready[1], &c, 1) != 1) _exit(1);
    pause();
    _exit(0);
  }
  char c = 0;
  REQUIRE(read(ready[0], &c, 1) == 1);
  REQUIRE(c == 'y');
  const std::string journal_before = testing::read_file(d.path() + "/journal.jsonl");
  {
    Training b;
    Checkpointer writer_here(options(d.path()));
    b.track(writer_here);
    auto refused = writer_here.restore_latest();
    REQUIRE_FALSE(refused.is_ok());
    REQUIRE(refused.status().message().find("locked by pid " + std::to_string(writer)) !=
            std::string::npos);
  }
  Training b;
  CheckpointerOptions o = options(d.path());
  o.read_only = true;
  Checkpointer reader(o);
  b.track(reader);
  auto r = reader.restore_latest();
  REQUIRE(r.is_ok());
  REQUIRE(r->step == 1);
  REQUIRE(torch::equal(a.model->weight, b.model->weight));
  REQUIRE(reader.save(2).code() == Code::kInvalidArgument);
  REQUIRE(reader.log_progress({}).code() == Code::kInvalidArgument);
  REQUIRE(reader.log_start(*r).code() == Code::kInvalidArgument);
  REQUIRE(testing::read_file(d.path() + "/journal.jsonl") == journal_before);
  kill(writer, SIGKILL);
  waitpid(writer, nullptr, 0);
}

}  // namespace
}  // namespace ckpt::writer_rules_test
