// Retention never deletes what it cannot prove is its own; damaged commit records are told apart
// from interrupted saves; the commit record is checked against the rank files; one writer per run
// directory (docs/security.md, "The store").
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <cstring>

#include "ckpt/io/mem_env.h"
#include "ckpt/store/journal.h"
#include "ckpt/store/rank_io.h"
#include "ckpt/store/run_dir.h"
#include "tests/common/sharded_checkpoint.h"
#include "tests/common/store_fixture.h"
#include "tests/common/test_util.h"

namespace ckpt::retention_test {
namespace {

using testing::TempDir;

// The components are committed and stored as the root attribute "components" too.
Status save(Env* env, const std::string& run, int64_t step, float value,
            std::vector<std::string> components = {"model"}) {
  testing::TinySave how;
  how.components = std::move(components);
  how.record_components = true;
  return testing::save_tiny(env, run, step, value, how);
}

bool exists(const std::string& p) {
  struct stat st;
  return ::lstat(p.c_str(), &st) == 0;
}

TEST_CASE("retention never deletes through a symlinked step directory", "[store]") {
  TempDir run, elsewhere;
  Env* env = Env::posix();
  REQUIRE(save(env, elsewhere.path(), 20, 2.0f).is_ok());
  const std::string target = elsewhere.path() + "/step-000000000020";
  REQUIRE(save(env, run.path(), 10, 1.0f).is_ok());
  REQUIRE(::symlink(target.c_str(), (run.path() + "/step-000000000020").c_str()) == 0);
  for (int64_t s = 30; s <= 50; s += 10) REQUIRE(save(env, run.path(), s, float(s)).is_ok());
  std::vector<std::string> kept;
  REQUIRE(store::apply_retention(env, run.path(), 1, 0, &kept).is_ok());
  // The target checkpoint is whole, the link is still there, and the run's own old ones went.
  REQUIRE(store::verify_checkpoint(env, target).problems.empty());
  REQUIRE(exists(target + "/COMMIT.json"));
  REQUIRE(exists(run.path() + "/step-000000000020"));
  REQUIRE_FALSE(exists(run.path() + "/step-000000000010"));
  REQUIRE_FALSE(exists(run.path() + "/step-000000000030"));
  REQUIRE(exists(run.path() + "/step-000000000050"));
  REQUIRE(kept.size() == 1);
  REQUIRE(kept[0].find("symbolic link") != std::string::npos);
}

TEST_CASE("retention leaves a step directory holding files ckpt did not write", "[store]") {
  TempDir run, elsewhere;
  Env* env = Env::posix();
  for (int64_t s = 10; s <= 30; s += 10) REQUIRE(save(env, run.path(), s, float(s)).is_ok());
  testing::write_file(elsewhere.path() + "/precious", "keep me");
  const std::string d10 = run.path() + "/step-000000000010";
  REQUIRE(::symlink((elsewhere.path() + "/precious").c_str(), (d10 + "/rank-00001.h5").c_str()) ==
          0);
  testing::write_file(run.path() + "/step-000000000020/notes.txt", "mine");
  // A symlink inside an interrupted save: unlinking through it would destroy the target.
  REQUIRE(::mkdir((run.path() + "/step-000000000025").c_str(), 0755) == 0);
  REQUIRE(::symlink(elsewhere.path().c_str(), (run.path() + "/step-000000000025/x").c_str()) == 0);
  std::vector<std::string> kept;
  REQUIRE(store::apply_retention(env, run.path(), 1, 0, &kept).is_ok());
  REQUIRE(testing::read_file(elsewhere.path() + "/precious") == "keep me");
  REQUIRE(exists(d10 + "/COMMIT.json"));
  REQUIRE(exists(run.path() + "/step-000000000020/notes.txt"));
  REQUIRE(exists(run.path() + "/step-000000000025/x"));
  REQUIRE(kept.size() == 3);
}

TEST_CASE("retention removes a sharded checkpoint with its INDEX", "[store]") {
  TempDir run;
  Env* env = Env::posix();
  ckpt_test::sharded::write_sharded(run.path());  // step 7, two rank files and the INDEX
  const std::string old = ckpt_test::sharded::step_dir(run.path());
  REQUIRE(exists(old + "/INDEX"));
  for (int64_t s = 10; s <= 20; s += 10) REQUIRE(save(env, run.path(), s, float(s)).is_ok());
  std::vector<std::string> kept;
  REQUIRE(store::apply_retention(env, run.path(), 2, 0, &kept).is_ok());
  INFO((kept.empty() ? std::string() : kept[0]));
  REQUIRE(kept.empty());
  REQUIRE_FALSE(exists(old));
  REQUIRE(exists(run.path() + "/step-000000000020/COMMIT.json"));
}

TEST_CASE("remove_tree unlinks symlinks inside and never follows them", "[store]") {
  TempDir a, b;
  testing::write_file(b.path() + "/f", "x");
  REQUIRE(::mkdir((a.path() + "/d").c_str(), 0755) == 0);
  REQUIRE(::symlink(b.path().c_str(), (a.path() + "/d/link").c_str()) == 0);
  REQUIRE(Env::posix()->remove_tree(a.path() + "/d").is_ok());
  REQUIRE(testing::read_file(b.path() + "/f") == "x");
}

TEST_CASE("retention keeps the newest committed and damaged checkpoints", "[store]") {
  MemEnv env;
  const std::string run = "/run";
  REQUIRE(env.make_dirs(run).is_ok());
  auto fake_save = [&](int64_t step) {  // commit only hashes files: no HDF5 needed in memory
    const std::string dir = path_join(run, step_dir_name(step));
    REQUIRE(env.make_dirs(dir).is_ok());
    REQUIRE(env.write_atomic(path_join(dir, rank_file_name(0)), "h5").is_ok());
    REQUIRE(env.write_atomic(path_join(dir, rank_manifest_name(0)), "{}").is_ok());
    REQUIRE(store::commit(&env, run, step, 1, {"model"}).is_ok());
  };
  for (int64_t s = 10; s <= 40; s += 10) fake_save(s);
  REQUIRE(env.write_atomic(run + "/step-000000000020/COMMIT.json", "{ damaged").is_ok());
  std::vector<std::string> kept;
  REQUIRE(store::apply_retention(&env, run, 1, 0, &kept).is_ok());
  auto all = store::list_checkpoints(&env, run);
  REQUIRE(all.is_ok());
  REQUIRE(all->size() == 2);
  REQUIRE(all->at(0).step == 20);
  REQUIRE(all->at(0).damaged);
  REQUIRE(all->at(1).step == 40);
  REQUIRE(all->at(1).committed);
}

TEST_CASE("a damaged commit record is not an interrupted save", "[store]") {
  TempDir run;
  Env* env = Env::posix();
  REQUIRE(save(env, run.path(), 10, 1.0f).is_ok());
  REQUIRE(save(env, run.path(), 20, 2.0f).is_ok());
  REQUIRE(env->make_dirs(run.path() + "/step-000000000030").is_ok());  // interrupted
  const std::string commit = run.path() + "/step-000000000020/COMMIT.json";
  std::string text = testing::read_file(commit);
  text[text.find("\"step\"") + 8] ^= 1;  // one digit of the step: the body's hash fails
  testing::write_file(commit, text);
  auto all = store::list_checkpoints(env, run.path());
  REQUIRE(all.is_ok());
  REQUIRE(all->size() == 3);
  REQUIRE(all->at(1).damaged);
  REQUIRE_FALSE(all->at(1).committed);
  REQUIRE(all->at(1).problem.find("damaged") != std::string::npos);
  REQUIRE_FALSE(all->at(2).damaged);
  auto latest = store::find_latest(env, run.path());
  REQUIRE(latest->step == 10);
  REQUIRE(latest->damaged_newer.size() == 1);
  REQUIRE(latest->note.find("damaged") != std::string::npos);
  REQUIRE(latest->note.find("is newer") == std::string::npos);
}

TEST_CASE("COMMIT.json that is a directory or a FIFO is damaged, never opened", "[store]") {
  TempDir run;
  Env* env = Env::posix();
  REQUIRE(save(env, run.path(), 10, 1.0f).is_ok());
  REQUIRE(::mkdir((run.path() + "/step-000000000020").c_str(), 0755) == 0);
  REQUIRE(::mkdir((run.path() + "/step-000000000020/COMMIT.json").c_str(), 0755) == 0);
  REQUIRE(::mkdir((run.path() + "/step-000000000030").c_str(), 0755) == 0);
  REQUIRE(::mkfifo((run.path() + "/step-000000000030/COMMIT.json").c_str(), 0644) == 0);
  auto all = store::list_checkpoints(env, run.path());
  REQUIRE(all.is_ok());
  REQUIRE(all->size() == 3);
  REQUIRE(all->at(1).damaged);
  REQUIRE(all->at(1).problem.find("not a regular file") != std::string::npos);
  REQUIRE(all->at(2).damaged);
  auto rec = store::read_commit(env, run.path() + "/step-000000000020");
  REQUIRE(rec.status().code() == Code::kCorrupt);
}

// Rewrites COMMIT.json with a correct hash: what an editor (or a bug) could do.
void rewrite_commit(Env* env, const std::string& dir, std::vector<std::string> components,
                    int64_t step) {
  auto rec = store::read_commit(env, dir);
  REQUIRE(rec.is_ok());
  rec->components = std::move(components);
  rec->step = step;
  testing::write_file(dir + "/COMMIT.json", encode_commit(*rec));
}

TEST_CASE("verify cross-checks the commit record against the rank file", "[store]") {
  TempDir run;
  Env* env = Env::posix();
  REQUIRE(save(env, run.path(), 10, 1.0f, {"model"}).is_ok());
  const std::string dir = run.path() + "/step-000000000010";
  REQUIRE(store::verify_checkpoint(env, dir).problems.empty());
  SECTION("a component the file has is missing from the record") {
    rewrite_commit(env, dir, {}, 10);
    auto rep = store::verify_checkpoint(env, dir);
    REQUIRE(rep.problems.size() == 1);
    REQUIRE(rep.problems[0].find("commit record lists [none]") != std::string::npos);
  }
  SECTION("a component the record lists is not in the file") {
    rewrite_commit(env, dir, {"model", "optimizer"}, 10);
    auto rep = store::verify_checkpoint(env, dir);
    REQUIRE_FALSE(rep.problems.empty());
    REQUIRE(rep.problems[0].find("optimizer") != std::string::npos);
  }
  SECTION("the record's step disagrees with the directory's name") {
    REQUIRE(::rename(dir.c_str(), (run.path() + "/step-000000000100").c_str()) == 0);
    auto rep = store::verify_checkpoint(env, run.path() + "/step-000000000100");
    REQUIRE_FALSE(rep.problems.empty());
    REQUIRE(rep.problems[0].find("names step 10, the directory is step 100") != std::string::npos);
  }
}

// What another process sees when it tries to take the lock: 0 taken, 1 refused naming `pid`.
int lock_in_child(const std::string& run, pid_t holder) {
  const pid_t child = fork();
  if (child == 0) {
    auto lock = store::lock_run_dir(Env::posix(), run);
    if (lock.is_ok()) _exit(0);
    const bool named = lock.status().message().find("locked by pid " + std::to_string(holder) +
                                                    " host ") != std::string::npos;
    _exit(named && lock.status().code() == Code::kLocked ? 1 : 2);
  }
  int status = 0;
  waitpid(child, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

TEST_CASE("one writer per run directory: another process is refused, naming the holder",
          "[store]") {
  TempDir run;
  Env* env = Env::posix();
  REQUIRE(lock_in_child(run.path(), 0) == 0);  // nobody holds it: the child takes it and exits
  auto first = store::lock_run_dir(env, run.path());
  REQUIRE(first.is_ok());
  auto same_process = store::lock_run_dir(env, run.path());  // shared, not refused
  REQUIRE(same_process.is_ok());
  REQUIRE(lock_in_child(run.path(), getpid()) == 1);
  first->reset();
  REQUIRE(lock_in_child(run.path(), getpid()) == 1);  // still held by the second handle
  same_process->reset();
  REQUIRE(lock_in_child(run.path(), 0) == 0);  // released with the last handle
  REQUIRE(testing::read_file(run.path() + "/LOCK").rfind("pid ", 0) == 0);
}

TEST_CASE("MemEnv locks are exclusive", "[store]") {
  MemEnv mem;
  REQUIRE(mem.make_dirs("/r").is_ok());
  auto m1 = mem.lock_file("/r/LOCK", "pid 1 host h\n");
  REQUIRE(m1.is_ok());
  auto m2 = mem.lock_file("/r/LOCK", "pid 2 host h\n");
  REQUIRE(m2.status().message().find("locked by pid 1 host h") != std::string::npos);
  m1->reset();
  REQUIRE(mem.lock_file("/r/LOCK", "pid 2 host h\n").is_ok());
}

TEST_CASE("invalid UTF-8 from outside never throws out of the journal or find_latest", "[store]") {
  MemEnv env;
  REQUIRE(env.make_dirs("/run/step-000000000010").is_ok());
  REQUIRE(env.write_atomic("/run/step-000000000010/rank-00000.h5", "x").is_ok());
  REQUIRE(env.write_atomic("/run/step-000000000010/rank-00000.manifest.json", "{}").is_ok());
  REQUIRE(store::commit(&env, "/run", 10, 1, {"model"}).is_ok());
  REQUIRE(env.write_atomic("/run/LATEST", "step-\xff\xfe\xc3(\n").is_ok());
  auto latest = store::find_latest(&env, "/run");
  REQUIRE(latest.is_ok());
  REQUIRE(latest->note.find("\\xff\\xfe") != std::string::npos);
  auto journal = store::Journal::open(&env, "/run");
  REQUIRE(journal.is_ok());
  REQUIRE((*journal)
              ->append(store::JournalEventType::kRestore, {{"note", "raw \xff\xfe bytes"}}, true)
              .is_ok());
  size_t skipped = 0;
  auto lines = store::read_journal(&env, "/run", &skipped);
  REQUIRE(lines.is_ok());
  REQUIRE(lines->size() == 1);
  REQUIRE(skipped == 0);
  REQUIRE(lines->at(0)["note"].get<std::string>() == "raw \xef\xbf\xbd\xef\xbf\xbd bytes");
}

}  // namespace
}  // namespace ckpt::retention_test

namespace ckpt::retention_test {
namespace {

ino_t inode_of(const std::string& p) {
  struct stat st;
  REQUIRE(::stat(p.c_str(), &st) == 0);
  return st.st_ino;
}

// Writes and commits `root` as `step` of `run` with keep_last = 1; the checkpoint's directory.
std::string save_tree(const std::string& run, int64_t step, Node* root, Env* env = Env::posix(),
                      store::RankWriteStats* stats = nullptr) {
  root->attrs["step"] = step;
  auto dir = store::save_dir(env, run, step);
  REQUIRE(dir.is_ok());
  REQUIRE(env->make_dirs(*dir).is_ok());
  auto m = store::write_rank(env, *dir, 0, step, 1, root, stats);
  INFO(m.status().to_string());
  REQUIRE(m.is_ok());
  REQUIRE(store::commit(env, run, step, 1, {"model", "optimizer"}).is_ok());
  REQUIRE(store::apply_retention(env, run, 1, 0).is_ok());
  return *dir;
}

// Fills the file at `path` with 0xaa: bytes a save that reuses it must all replace.
void scribble(const std::string& path) {
  std::string junk(testing::read_file(path).size(), '\xaa');
  FILE* f = std::fopen(path.c_str(), "r+b");
  REQUIRE(f != nullptr);
  REQUIRE(std::fwrite(junk.data(), 1, junk.size(), f) == junk.size());
  std::fclose(f);
}

void same_bytes(const Node& saved, const std::string& dir) {
  auto back = store::read_rank(Env::posix(), dir, 0);
  REQUIRE(back.is_ok());
  for (const auto& [name, t] : saved.children.at("model").tensors) {
    INFO(name);
    if (!t.alias_of.empty() || t.nbytes == 0) continue;
    const Tensor& b = back->children.at("model").tensors.at(name);
    REQUIRE(b.nbytes == t.nbytes);
    REQUIRE(std::memcmp(b.data, t.data, t.nbytes) == 0);
  }
}

TEST_CASE("retention keeps a rank file as the spare the next save overwrites in place", "[store]") {
  TempDir tmp;
  const std::string run = tmp.path();
  std::vector<std::vector<unsigned char>> storage;
  Node root = testing::sample_tree(&storage);
  const std::string first = save_tree(run, 1, &root);
  const ino_t first_inode = inode_of(path_join(first, rank_file_name(0)));
  save_tree(run, 2, &root);
  const std::string spare = path_join(run, ".spare/" + rank_file_name(0));
  REQUIRE(exists(spare));
  CHECK(inode_of(spare) == first_inode);  // step 1's file, not unlinked
  // The spare holds other bytes than the new file will: every one of them is rewritten.
  scribble(spare);
  for (auto& b : storage.front()) b ^= 0x5a;  // new values, same layout
  const std::string third = save_tree(run, 3, &root);
  CHECK(inode_of(path_join(third, rank_file_name(0))) == first_inode);  // reused in place
  const store::VerifyReport rep = store::verify_checkpoint(Env::posix(), third);
  INFO((rep.problems.empty() ? std::string() : rep.problems.front()));
  CHECK(rep.problems.empty());
  same_bytes(root, third);
  CHECK(exists(spare));  // step 2's file, now
  // A state of another size does not take the spare's blocks as they are: truncated, written.
  storage.emplace_back(4096 * 3, 7);
  root.children["model"].tensors["grown"] =
      Tensor::borrow(DType::kUInt8, {4096 * 3}, storage.back().data(), 4096 * 3);
  const std::string fourth = save_tree(run, 4, &root);
  CHECK(store::verify_checkpoint(Env::posix(), fourth).problems.empty());
  same_bytes(root, fourth);
  // Readers never see .spare.
  auto all = store::list_checkpoints(Env::posix(), run);
  REQUIRE(all.is_ok());
  REQUIRE(all->size() == 1);
  CHECK(all->front().step == 4);
}

// A large state is written with direct I/O (rank_write.cc): over a spare, the tensors' bodies go
// direct while the structure, the zeros between tensors and the tails that share a page with them
// are written through the page cache after those writes. Tensor sizes that are not multiples of
// 4 KiB put a tail and a gap into the same page.
TEST_CASE("a large state overwrites its spare with direct I/O, every byte", "[store]") {
  TempDir tmp;
  const std::string run = tmp.path();
  std::vector<std::vector<unsigned char>> storage;
  Node root;
  const size_t sizes[] = {(3u << 20) + 100, 4096 * 5, 777, (2u << 20) + 4095, 4096, 1};
  unsigned char v = 1;
  for (size_t n : sizes) {
    storage.emplace_back(n);
    for (auto& b : storage.back()) b = v += 37;
    root.children["model"].tensors["t" + std::to_string(storage.size())] =
        Tensor::borrow(DType::kUInt8, {static_cast<int64_t>(n)}, storage.back().data(), n);
  }
  storage.emplace_back(8, 3);
  root.children["optimizer"].tensors["step"] =
      Tensor::borrow(DType::kInt64, {1}, storage.back().data(), 8);
  Env* env = Env::posix_direct_io();
  save_tree(run, 1, &root, env);
  save_tree(run, 2, &root, env);
  const std::string spare = path_join(run, ".spare/" + rank_file_name(0));
  REQUIRE(exists(spare));
  scribble(spare);
  const ino_t spare_inode = inode_of(spare);
  for (auto& s : storage) {
    for (auto& b : s) b ^= 0x5a;
  }
  store::RankWriteStats stats;
  const std::string third = save_tree(run, 3, &root, env, &stats);
  CHECK(inode_of(path_join(third, rank_file_name(0))) == spare_inode);  // reused in place
  if (!stats.direct_io) WARN("this file system refuses O_DIRECT: the write went buffered");
  const store::VerifyReport rep = store::verify_checkpoint(Env::posix(), third);
  INFO((rep.problems.empty() ? std::string() : rep.problems.front()));
  CHECK(rep.problems.empty());
  same_bytes(root, third);
}

}  // namespace
}  // namespace ckpt::retention_test
