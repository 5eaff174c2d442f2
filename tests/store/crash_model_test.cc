// The commit protocol under a power failure, not just a process crash: FaultInjectionEnv's
// drop_unsynced() loses every byte and directory entry that was not fsynced, and a save cut at
// any operation must still leave LATEST and find_latest() naming an intact checkpoint. Also the
// in-memory Env.
#include <catch2/catch.hpp>

#include "ckpt/io/fault_injection_env.h"
#include "ckpt/io/mem_env.h"
#include "ckpt/store/background_save.h"
#include "ckpt/store/journal.h"
#include "ckpt/store/rank_io.h"
#include "ckpt/store/run_dir.h"
#include "tests/common/store_fixture.h"
#include "tests/common/test_util.h"

namespace ckpt::crash_model_test {
namespace {

using testing::TempDir;

// Every save here ends with retention keep-last 1, as a single-process Checkpointer's does.
const testing::TinySave kKeepOne = testing::TinySave::keeping(1);

Status save(Env* env, const std::string& run, int64_t step, float value) {
  return testing::save_tiny(env, run, step, value, kKeepOne);
}

TEST_CASE("drop_unsynced reverts unsynced bytes and undoes unsynced directory entries", "[store]") {
  TempDir tmp;
  FaultInjectionEnv env(Env::posix());
  const std::string a = tmp.path() + "/a", b = tmp.path() + "/b";
  REQUIRE(env.write_atomic(a, "durable").is_ok());  // synced, renamed, directory synced
  {
    auto f = env.open_append(a);
    REQUIRE(f.is_ok());
    REQUIRE((*f)->append("+lost", 5).is_ok());
  }
  {
    auto f = env.new_writable(b);  // a new file, synced, but its directory is not
    REQUIRE(f.is_ok());
    REQUIRE((*f)->append("b", 1).is_ok());
    REQUIRE((*f)->sync().is_ok());
  }
  REQUIRE(env.rename(b, a + ".new").is_ok());
  SECTION("data only") {
    REQUIRE(env.drop_unsynced(CrashLoss::kData).is_ok());
    REQUIRE(testing::read_file(a) == "durable");
    REQUIRE(testing::read_file(a + ".new") == "b");
  }
  SECTION("data and directory entries") {
    REQUIRE(env.drop_unsynced(CrashLoss::kDataAndEntries).is_ok());
    REQUIRE(testing::read_file(a) == "durable");
    REQUIRE_FALSE(Env::posix()->exists(a + ".new"));
    REQUIRE_FALSE(Env::posix()->exists(b));
  }
}

// Counts the Env operations of one save after a first one.
uint64_t operations_of_a_save() {
  const Result<uint64_t> ops = testing::operations_of_a_save(kKeepOne);
  REQUIRE(ops.is_ok());
  return *ops;
}

TEST_CASE("a power failure at any operation of a save leaves an intact latest checkpoint",
          "[store]") {
  const uint64_t total = operations_of_a_save();
  REQUIRE(total >= 10);
  for (CrashLoss loss : {CrashLoss::kData, CrashLoss::kDataAndEntries}) {
    for (uint64_t k = 1; k <= total + 1; ++k) {
      INFO("power failure at operation " << k << " of " << total << ", loss "
                                         << (loss == CrashLoss::kData ? "data" : "data+entries"));
      TempDir tmp;
      FaultInjectionEnv env(Env::posix());
      REQUIRE(save(&env, tmp.path(), 10, 1.0f).is_ok());
      env.fail_at(env.operations() + k);
      const bool saved = save(&env, tmp.path(), 20, 2.0f).is_ok();
      REQUIRE(saved == (k == total + 1));
      REQUIRE(env.drop_unsynced(loss).is_ok());
      auto latest = store::find_latest(Env::posix(), tmp.path());
      REQUIRE(latest.is_ok());
      REQUIRE((latest->step == 10 || latest->step == 20));
      // Once the save returned, its checkpoint is durable whatever the OS then loses.
      if (saved) REQUIRE(latest->step == 20);
      REQUIRE(store::verify_checkpoint(Env::posix(), latest->dir).problems.empty());
      // The process that restarts can save again on top of whatever the crash left.
      REQUIRE(save(Env::posix(), tmp.path(), 30, 3.0f).is_ok());
      REQUIRE(store::find_latest(Env::posix(), tmp.path())->step == 30);
    }
  }
}

// The same save on store::BackgroundSaver's thread: the caller's buffer is overwritten right
// after submit (the next optimizer step), the crash comes at any operation of the background
// work, and the failure is what wait() returns.
Status save_in_background(Env* env, const std::string& run, int64_t step, float value) {
  std::vector<float> data(1000, value);
  Node root;
  root.attrs["step"] = step;
  root.child("model").tensors["w"] =
      Tensor::borrow(DType::kFloat32, {1000}, data.data(), data.size() * sizeof(float));
  store::BackgroundJob job;
  job.label = "step " + std::to_string(step);
  job.write = [=](Node* tree, const store::SubmitReport&) -> Status {
    return testing::write_and_commit(env, run, step, tree, kKeepOne);
  };
  store::BackgroundSaver saver;
  CKPT_RETURN_IF_ERROR(saver.submit(std::move(root), std::move(job)));
  std::fill(data.begin(), data.end(), -1.0f);
  return saver.wait();
}

TEST_CASE("a power failure at any operation of a background save leaves an intact latest",
          "[store]") {
  const uint64_t total = operations_of_a_save();
  for (CrashLoss loss : {CrashLoss::kData, CrashLoss::kDataAndEntries}) {
    for (uint64_t k = 1; k <= total + 1; ++k) {
      INFO("power failure at operation " << k << " of " << total);
      TempDir tmp;
      FaultInjectionEnv env(Env::posix());
      REQUIRE(save(&env, tmp.path(), 10, 1.0f).is_ok());
      env.fail_at(env.operations() + k);
      const Status s = save_in_background(&env, tmp.path(), 20, 2.0f);
      REQUIRE(s.is_ok() == (k == total + 1));
      if (!s.is_ok()) REQUIRE(s.message().find("background save of step 20") == 0);
      REQUIRE(env.drop_unsynced(loss).is_ok());
      auto latest = store::find_latest(Env::posix(), tmp.path());
      REQUIRE(latest.is_ok());
      REQUIRE((latest->step == 10 || latest->step == 20));
      if (s.is_ok()) REQUIRE(latest->step == 20);
      REQUIRE(store::verify_checkpoint(Env::posix(), latest->dir).problems.empty());
      auto root = store::read_rank(Env::posix(), latest->dir, 0);
      REQUIRE(root.is_ok());
      const float first =
          *static_cast<const float*>(root->find_child("model")->find_tensor("w")->data);
      REQUIRE(first == (latest->step == 20 ? 2.0f : 1.0f));  // the snapshot, never the -1s
    }
  }
}

TEST_CASE("MemEnv: files, directories, renames, locks", "[store]") {
  MemEnv env;
  REQUIRE_FALSE(env.new_writable("/no/such/dir/f").is_ok());
  REQUIRE(env.make_dirs("/d/e").is_ok());
  REQUIRE(env.is_dir("/d"));
  REQUIRE(env.write_atomic("/d/e/f", "hello").is_ok());
  REQUIRE(*env.read_all("/d/e/f") == "hello");
  REQUIRE(*env.file_size("/d/e/f") == 5);
  REQUIRE(*env.entry_kind("/d/e/f") == FileKind::kRegular);
  REQUIRE(*env.entry_kind("/d/e") == FileKind::kDirectory);
  REQUIRE(*env.entry_kind("/d/x") == FileKind::kMissing);
  REQUIRE(*env.list_dir("/d") == std::vector<std::string>{"e"});
  REQUIRE(*env.list_dir("/d/e") == std::vector<std::string>{"f"});
  {
    auto w = env.open_for_update("/d/e/f");
    REQUIRE(w.is_ok());
    REQUIRE((*w)->write_at(1, "EL", 2).is_ok());
  }
  REQUIRE(*env.read_all("/d/e/f") == "hELlo");
  auto r = env.open_random("/d/e/f");
  char buf[8];
  REQUIRE((*r)->read_at(3, buf, 2).is_ok());
  REQUIRE_FALSE((*r)->read_at(3, buf, 3).is_ok());  // truncated
  REQUIRE(env.open_random("/d/e").status().code() == Code::kInvalidArgument);
  REQUIRE_FALSE(env.remove_dir("/d/e").is_ok());  // not empty
  REQUIRE(env.rename("/d/e/f", "/d/g").is_ok());
  REQUIRE_FALSE(env.exists("/d/e/f"));
  REQUIRE(env.remove_dir("/d/e").is_ok());
  REQUIRE(env.remove_tree("/d").is_ok());
  REQUIRE_FALSE(env.exists("/d/g"));
}

TEST_CASE("MemEnv runs the commit protocol and the journal without a disk", "[store]") {
  MemEnv mem;
  FaultInjectionEnv env(&mem);
  const std::string run = "run";
  for (int64_t step = 10; step <= 50; step += 10) {
    const std::string dir = path_join(run, step_dir_name(step));
    REQUIRE(env.make_dirs(dir).is_ok());
    REQUIRE(env.write_atomic(path_join(dir, rank_file_name(0)), std::string(100, 'x')).is_ok());
    REQUIRE(env.write_atomic(path_join(dir, rank_manifest_name(0)), "{}").is_ok());
    REQUIRE(store::commit(&env, run, step, 1, {"model"}).is_ok());
    REQUIRE(store::apply_retention(&env, run, 2, 0).is_ok());
  }
  REQUIRE(store::list_checkpoints(&mem, run)->size() == 2);
  REQUIRE(store::find_latest(&mem, run)->step == 50);
  auto j = store::Journal::open(&env, run);
  REQUIRE(j.is_ok());
  REQUIRE((*j)->append(store::JournalEventType::kProgress, {{"step", 1}}, false).is_ok());
  REQUIRE((*j)->append(store::JournalEventType::kSave, {{"step", 1}}, true).is_ok());
  REQUIRE((*j)->append(store::JournalEventType::kProgress, {{"step", 2}}, false)
              .is_ok());  // not synced
  REQUIRE(env.drop_unsynced(CrashLoss::kDataAndEntries).is_ok());
  auto lines = store::read_journal(&mem, run);
  REQUIRE(lines.is_ok());
  REQUIRE(lines->size() == 2);  // the unsynced progress line is gone, the synced ones stay
}

}  // namespace
}  // namespace ckpt::crash_model_test
