// Issue 27, store side: a re-save of a committed step cut at any operation (and under a power
// failure) leaves an intact checkpoint; steps outside [0, kMaxStep] are refused before a byte is
// written; RUN/LOCK dies with the process that took it although a forked child lives on, and a
// lock whose run directory was deleted says so.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <thread>

#include "ckpt/io/fault_injection_env.h"
#include "ckpt/io/mem_env.h"
#include "ckpt/store/rank_io.h"
#include "ckpt/store/run_dir.h"
#include "tests/common/store_fixture.h"
#include "tests/common/test_util.h"

namespace ckpt::resave_lock_test {
namespace {

using testing::TempDir;

const testing::TinySave kKeepTwo = testing::TinySave::keeping(2);

float first_value(const std::string& dir) {
  auto root = store::read_rank(Env::posix(), dir, 0);
  REQUIRE(root.is_ok());
  return *static_cast<const float*>(root->find_child("model")->find_tensor("w")->data);
}

// The operations of a re-save of step 20 (value 2) over a committed step 20 (value 1).
uint64_t operations_of_a_resave() {
  TempDir tmp;
  FaultInjectionEnv env(Env::posix());
  REQUIRE(testing::save_tiny(&env, tmp.path(), 10, 1.0f, kKeepTwo).is_ok());
  REQUIRE(testing::save_tiny(&env, tmp.path(), 20, 1.0f, kKeepTwo).is_ok());
  const uint64_t before = env.operations();
  REQUIRE(testing::save_tiny(&env, tmp.path(), 20, 2.0f, kKeepTwo).is_ok());
  return env.operations() - before;
}

TEST_CASE("a re-save cut at any operation, even by a power failure, leaves step N intact",
          "[store]") {
  const uint64_t total = operations_of_a_resave();
  REQUIRE(total >= 10);
  for (CrashLoss loss : {CrashLoss::kData, CrashLoss::kDataAndEntries}) {
    for (uint64_t k = 1; k <= total + 1; ++k) {
      INFO("crash at operation " << k << " of " << total << " of the re-save, loss "
                                 << (loss == CrashLoss::kData ? "data" : "data+entries"));
      TempDir tmp;
      FaultInjectionEnv env(Env::posix());
      REQUIRE(testing::save_tiny(&env, tmp.path(), 10, 1.0f, kKeepTwo).is_ok());
      REQUIRE(testing::save_tiny(&env, tmp.path(), 20, 1.0f, kKeepTwo).is_ok());
      env.fail_at(env.operations() + k);
      const bool saved = testing::save_tiny(&env, tmp.path(), 20, 2.0f, kKeepTwo).is_ok();
      REQUIRE(saved == (k == total + 1));
      REQUIRE(env.drop_unsynced(loss).is_ok());
      // Never a step that lost its checkpoint: step 20, old or new, committed and intact.
      auto latest = store::find_latest(Env::posix(), tmp.path());
      REQUIRE(latest.is_ok());
      REQUIRE(latest->step == 20);
      REQUIRE(latest->note.empty());
      REQUIRE(store::verify_checkpoint(Env::posix(), latest->dir).problems.empty());
      const float got = first_value(latest->dir);
      REQUIRE((got == 1.0f || got == 2.0f));
      if (saved) REQUIRE(got == 2.0f);
      // The relaunch re-saves again on top of whatever was left, and retention cleans up.
      REQUIRE(testing::save_tiny(Env::posix(), tmp.path(), 20, 3.0f, kKeepTwo).is_ok());
      REQUIRE(first_value(store::find_latest(Env::posix(), tmp.path())->dir) == 3.0f);
      REQUIRE_FALSE(Env::posix()->exists(store::resave_dir(tmp.path(), 20)));
      REQUIRE(testing::save_tiny(Env::posix(), tmp.path(), 30, 3.0f, kKeepTwo).is_ok());
      REQUIRE(testing::save_tiny(Env::posix(), tmp.path(), 40, 3.0f, kKeepTwo).is_ok());
      // .spare: the rank file retention kept for the next save (run_dir.h, spare rank files).
      REQUIRE(Env::posix()->list_dir_or_empty(tmp.path()) ==
              std::vector<std::string>{".spare", "LATEST", step_dir_name(30), step_dir_name(40)});
    }
  }
}

TEST_CASE("a re-save writes beside the committed step and swaps it in", "[store]") {
  MemEnv mem;
  REQUIRE(*store::save_dir(&mem, "run", 7) == "run/" + step_dir_name(7));
  REQUIRE(mem.make_dirs("run/" + step_dir_name(7)).is_ok());
  REQUIRE(mem.write_atomic("run/" + step_dir_name(7) + "/COMMIT.json", "{}").is_ok());
  REQUIRE(*store::save_dir(&mem, "run", 7) == "run/" + step_dir_name(7) + ".resave");
  REQUIRE(store::resave_dir("run", 7) == "run/" + step_dir_name(7) + ".resave");
  // MemEnv's exchange swaps whole trees.
  REQUIRE(mem.make_dirs("run/b/sub").is_ok());
  REQUIRE(mem.write_atomic("run/b/sub/f", "b").is_ok());
  REQUIRE(mem.exchange("run/" + step_dir_name(7), "run/b").is_ok());
  REQUIRE(*mem.read_all("run/" + step_dir_name(7) + "/sub/f") == "b");
  REQUIRE(*mem.read_all("run/b/COMMIT.json") == "{}");
  REQUIRE_FALSE(mem.exchange("run/b", "run/none").is_ok());
}

TEST_CASE("steps outside 0..kMaxStep are refused before anything is written", "[store]") {
  REQUIRE(check_step(0).is_ok());
  REQUIRE(check_step(kMaxStep).is_ok());
  REQUIRE(step_dir_name(kMaxStep) == "step-999999999999");
  int64_t parsed = 0;
  REQUIRE(parse_step_dir_name(step_dir_name(kMaxStep), &parsed));
  REQUIRE(parsed == kMaxStep);
  for (int64_t bad : {kMaxStep + 1, int64_t{-1}, INT64_MIN, INT64_MAX}) {
    INFO("step " << bad);
    const Status s = check_step(bad);
    REQUIRE(s.code() == Code::kInvalidArgument);
    REQUIRE(s.message() == "step " + std::to_string(bad) +
                               " is out of range: a checkpoint's step is in [0, 999999999999] "
                               "(its directory name holds 12 digits)");
    TempDir tmp;
    REQUIRE(testing::save_tiny(Env::posix(), tmp.path(), 10, 1.0f).is_ok());
    REQUIRE(store::save_dir(Env::posix(), tmp.path(), bad).status().code() ==
            Code::kInvalidArgument);
    std::vector<float> data(4, 2.0f);
    Node root;
    root.child("model").tensors["w"] =
        Tensor::borrow(DType::kFloat32, {4}, data.data(), data.size() * sizeof(float));
    const std::string dir = path_join(tmp.path(), "odd");
    REQUIRE(Env::posix()->make_dirs(dir).is_ok());
    REQUIRE(store::write_rank(Env::posix(), dir, 0, bad, 1, &root).status().code() ==
            Code::kInvalidArgument);
    REQUIRE(Env::posix()->list_dir_or_empty(dir).empty());
    REQUIRE(store::commit(Env::posix(), tmp.path(), bad, 1, {"model"}).code() ==
            Code::kInvalidArgument);
    REQUIRE(testing::read_file(tmp.path() + "/LATEST") == step_dir_name(10) + "\n");
  }
}

// A process that takes RUN/LOCK, forks a child that outlives it (a DataLoader worker), and is
// SIGKILLed. The lock must be free at once, while the child still runs.
TEST_CASE("RUN/LOCK dies with the process that took it, not with a child it forked", "[store]") {
  TempDir run;
  int ready[2], pids[2];
  REQUIRE(pipe(ready) == 0);
  REQUIRE(pipe(pids) == 0);
  const pid_t holder = fork();
  REQUIRE(holder >= 0);
  if (holder == 0) {
    auto lock = store::lock_run_dir(Env::posix(), run.path());
    if (!lock.is_ok()) _exit(3);
    const pid_t worker = fork();
    if (worker == 0) {  // the worker: lives on for 5 s; its own lock attempt is refused
      auto mine = store::lock_run_dir(Env::posix(), run.path());
      const char r = mine.is_ok() ? 'x' : 'w';
      if (write(ready[1], &r, 1) != 1) _exit(4);
      std::this_thread::sleep_for(std::chrono::seconds(5));
      _exit(0);
    }
    if (write(pids[1], &worker, sizeof worker) != static_cast<ssize_t>(sizeof worker)) _exit(4);
    std::this_thread::sleep_for(std::chrono::seconds(30));  // killed long before
    _exit(0);
  }
  close(ready[1]);
  close(pids[1]);
  pid_t worker = 0;
  char refused = 0;
  REQUIRE(read(pids[0], &worker, sizeof worker) == static_cast<ssize_t>(sizeof worker));
  REQUIRE(read(ready[0], &refused, 1) == 1);
  close(ready[0]);
  close(pids[0]);
  REQUIRE(refused == 'w');  // the child is another process: the holder's lock refused it
  REQUIRE(kill(holder, SIGKILL) == 0);
  int status = 0;
  REQUIRE(waitpid(holder, &status, 0) == holder);
  REQUIRE(kill(worker, 0) == 0);  // the worker still runs (reparented)
  auto relaunch = store::lock_run_dir(Env::posix(), run.path());
  INFO((relaunch.is_ok() ? std::string() : relaunch.status().message()));
  REQUIRE(relaunch.is_ok());
  (void)kill(worker, SIGKILL);
}

TEST_CASE("a lock whose run directory was deleted and made again says so", "[store]") {
  TempDir tmp;
  const std::string run = tmp.path() + "/run";
  REQUIRE(Env::posix()->make_dirs(run).is_ok());
  auto lock = store::lock_run_dir(Env::posix(), run);
  REQUIRE(lock.is_ok());
  REQUIRE((*lock)->check().is_ok());
  REQUIRE(Env::posix()->remove_tree(run).is_ok());
  Status s = (*lock)->check();
  REQUIRE(s.code() == Code::kIoError);
  REQUIRE(s.message() == run +
                             "/LOCK: the run directory was removed or replaced while this "
                             "process held its lock (the lock is on a file no longer there, and "
                             "another process may hold a new one); refusing to write");
  // A relaunch makes the directory and takes a fresh lock: the old holder still may not write,
  // and a new lock in this process is a new lock, not the stale one.
  REQUIRE(Env::posix()->make_dirs(run).is_ok());
  auto fresh = store::lock_run_dir(Env::posix(), run);
  REQUIRE(fresh.is_ok());
  REQUIRE((*fresh)->check().is_ok());
  REQUIRE_FALSE((*lock)->check().is_ok());
}

}  // namespace
}  // namespace ckpt::resave_lock_test
