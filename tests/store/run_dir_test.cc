#include "ckpt/store/run_dir.h"

#include <catch2/catch.hpp>
#include <filesystem>

#include "ckpt/io/fault_injection_env.h"
#include "tests/common/commit_reads.h"
#include "tests/common/store_fixture.h"
#include "tests/common/test_util.h"

namespace ckpt::run_dir_test {
namespace {

using testing::save_tiny;  // one complete save: rank file, commit, LATEST (docs/format.md §2)
using testing::TempDir;

TEST_CASE("commit writes COMMIT.json and LATEST, find_latest follows it", "[store]") {
  TempDir tmp;
  Env* env = Env::posix();
  REQUIRE(save_tiny(env, tmp.path(), 10, 1.0f).is_ok());
  REQUIRE(save_tiny(env, tmp.path(), 20, 2.0f).is_ok());
  auto latest = store::find_latest(env, tmp.path());
  REQUIRE(latest.is_ok());
  REQUIRE(latest->step == 20);
  REQUIRE(latest->note.empty());
  REQUIRE(testing::read_file(tmp.path() + "/LATEST") == "step-000000000020\n");
  auto rep = store::verify_checkpoint(env, latest->dir);
  REQUIRE(rep.problems.empty());
  REQUIRE(rep.files == 2);
  REQUIRE(rep.tensors == 1);
}

TEST_CASE("listed_rank_file finds a rank's file in the commit record, or names it", "[store]") {
  TempDir tmp;
  Env* env = Env::posix();
  REQUIRE(save_tiny(env, tmp.path(), 10, 1.0f).is_ok());
  const std::string dir = path_join(tmp.path(), step_dir_name(10));
  auto rec = store::read_commit(env, dir);
  REQUIRE(rec.is_ok());
  auto listed = store::listed_rank_file(*rec, dir, 0);
  REQUIRE(listed.is_ok());
  REQUIRE(listed->name == rank_file_name(0));
  REQUIRE(listed->regions_xxh3.has_value());  // the restore checks the whole file with it
  auto missing = store::listed_rank_file(*rec, dir, 1);
  REQUIRE(missing.status().code() == Code::kCorrupt);
  REQUIRE(missing.status().message() ==
          path_join(dir, rank_file_name(1)) + ": not listed in COMMIT.json");
}

TEST_CASE("an uncommitted step directory is skipped and reported", "[store]") {
  TempDir tmp;
  Env* env = Env::posix();
  REQUIRE(save_tiny(env, tmp.path(), 10, 1.0f).is_ok());
  REQUIRE(env->make_dirs(tmp.path() + "/step-000000000030").is_ok());
  auto latest = store::find_latest(env, tmp.path());
  REQUIRE(latest->step == 10);
  auto all = store::list_checkpoints(env, tmp.path());
  REQUIRE(all->size() == 2);
  REQUIRE_FALSE(all->at(1).committed);
  REQUIRE(all->at(1).problem.find("no COMMIT.json") != std::string::npos);
}

TEST_CASE("a crash at any operation of a save never leaves LATEST naming an incomplete checkpoint",
          "[store]") {
  // Count the operations of one save, then crash at each of them in turn.
  const Result<uint64_t> ops = testing::operations_of_a_save();
  REQUIRE(ops.is_ok());
  const uint64_t total = *ops;
  REQUIRE(total >= 8);
  for (uint64_t k = 1; k <= total; ++k) {
    INFO("crash at operation " << k << " of " << total);
    TempDir tmp;
    FaultInjectionEnv env(Env::posix());
    REQUIRE(save_tiny(&env, tmp.path(), 10, 1.0f).is_ok());
    env.fail_at(env.operations() + k);
    REQUIRE_FALSE(save_tiny(&env, tmp.path(), 20, 2.0f).is_ok());
    auto latest = store::find_latest(Env::posix(), tmp.path());
    REQUIRE(latest.is_ok());
    REQUIRE((latest->step == 10 || latest->step == 20));
    REQUIRE(store::verify_checkpoint(Env::posix(), latest->dir).problems.empty());
    const std::string named = testing::read_file(tmp.path() + "/LATEST");
    int64_t step = 0;
    REQUIRE(parse_step_dir_name(named.substr(0, 17), &step));
    REQUIRE(store::verify_checkpoint(Env::posix(), path_join(tmp.path(), step_dir_name(step)))
                .problems.empty());
  }
}

TEST_CASE("retention keeps the newest N and every K-th", "[store]") {
  TempDir tmp;
  Env* env = Env::posix();
  for (int64_t s = 10; s <= 60; s += 10) REQUIRE(save_tiny(env, tmp.path(), s, float(s)).is_ok());
  REQUIRE(env->make_dirs(tmp.path() + "/step-000000000015").is_ok());  // an interrupted save
  REQUIRE(store::apply_retention(env, tmp.path(), 2, 20).is_ok());
  auto all = store::list_checkpoints(env, tmp.path());
  std::vector<int64_t> steps;
  for (const auto& e : *all) steps.push_back(e.step);
  REQUIRE(steps == std::vector<int64_t>{20, 40, 50, 60});
}

TEST_CASE("find_latest prefers a newer committed checkpoint and survives a damaged LATEST",
          "[store]") {
  TempDir tmp;
  Env* env = Env::posix();
  REQUIRE(save_tiny(env, tmp.path(), 10, 1.0f).is_ok());
  REQUIRE(save_tiny(env, tmp.path(), 20, 2.0f).is_ok());
  testing::write_file(tmp.path() + "/LATEST", "step-000000000010\n");
  auto a = store::find_latest(env, tmp.path());
  REQUIRE(a->step == 20);
  REQUIRE(a->note.find("newer and committed") != std::string::npos);
  testing::write_file(tmp.path() + "/LATEST", "garbage");
  auto b = store::find_latest(env, tmp.path());
  REQUIRE(b->step == 20);
  REQUIRE(b->note.find("damaged") != std::string::npos);
  TempDir empty;
  REQUIRE(store::find_latest(env, empty.path()).status().code() == Code::kNotFound);
}

TEST_CASE("find_latest reads commit records newest first, up to the first committed one",
          "[store]") {
  TempDir tmp;
  Env* env = Env::posix();
  for (int64_t step = 10; step <= 70; step += 10) {
    REQUIRE(save_tiny(env, tmp.path(), step, static_cast<float>(step)).is_ok());
  }
  // step 70's record damaged, step 80 an interrupted save (no record)
  testing::write_file(tmp.path() + "/step-000000000070/COMMIT.json", "{not json");
  std::filesystem::create_directory(tmp.path() + "/step-000000000080");
  testing::CommitReads counting(env);
  auto latest = store::find_latest(&counting, tmp.path());
  REQUIRE(latest.is_ok());
  REQUIRE(latest->step == 60);
  REQUIRE(latest->damaged_newer.size() == 1);
  REQUIRE(latest->damaged_newer[0].step == 70);
  REQUIRE(latest->commit.step == 60);
  CHECK(counting.reads == 2);  // 70 (damaged) and 60: not the five older ones
  counting.reads = 0;
  auto all = store::list_checkpoints(&counting, tmp.path());
  REQUIRE(all.is_ok());
  REQUIRE(all->size() == 8);
  CHECK(counting.reads == 7);  // the listing reads every record
}

TEST_CASE("look_up_latest: with nothing committed, every damaged record, read once, else none",
          "[store]") {
  TempDir tmp;
  Env* env = Env::posix();
  testing::CommitReads counting(env);
  auto missing = store::look_up_latest(&counting, tmp.path() + "/no-such-run");
  REQUIRE(missing.is_ok());  // no run directory yet: a fresh start, nothing stepped over
  CHECK(!missing->latest);
  CHECK(missing->damaged.empty());
  for (int64_t step = 10; step <= 40; step += 10) {
    REQUIRE(save_tiny(env, tmp.path(), step, static_cast<float>(step)).is_ok());
  }
  // 10 and 30 damaged, 20 and 40 interrupted (no record): nothing is committed
  testing::write_file(tmp.path() + "/step-000000000010/COMMIT.json", "{not json");
  testing::write_file(tmp.path() + "/step-000000000030/COMMIT.json", "[]");
  std::filesystem::remove(tmp.path() + "/step-000000000020/COMMIT.json");
  std::filesystem::remove(tmp.path() + "/step-000000000040/COMMIT.json");
  auto fresh = store::look_up_latest(&counting, tmp.path());
  REQUIRE(fresh.is_ok());
  CHECK(!fresh->latest);
  REQUIRE(fresh->damaged.size() == 2);  // ascending, as list_checkpoints gives them
  CHECK(fresh->damaged[0].step == 10);
  CHECK(fresh->damaged[1].step == 30);
  CHECK(fresh->damaged[1].problem.find("COMMIT.json") != std::string::npos);
  CHECK(counting.reads == 2);  // each of the two records there once: no second listing
  CHECK(store::find_latest(env, tmp.path()).status().code() == Code::kNotFound);
  REQUIRE(save_tiny(env, tmp.path(), 50, 50.0F).is_ok());
  auto found = store::look_up_latest(env, tmp.path());
  REQUIRE(found.is_ok());
  REQUIRE(found->latest);
  CHECK(found->latest->step == 50);
  CHECK(found->damaged.empty());  // none newer than step 50
  CHECK(found->latest->damaged_newer.empty());
}

}  // namespace
}  // namespace ckpt::run_dir_test
