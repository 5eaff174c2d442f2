// store::BackgroundSaver and its SnapshotArena: the snapshot is taken at submit() (later writes
// to the caller's memory do not reach the file), the arena is allocated once per state, at most
// one save is in flight, and a background failure is returned by the next submit() or wait().
#include "ckpt/store/background_save.h"

#include <catch2/catch.hpp>
#include <condition_variable>
#include <mutex>
#include <vector>

#include "ckpt/io/fault_injection_env.h"
#include "ckpt/store/rank_io.h"
#include "ckpt/store/run_dir.h"
#include "tests/common/store_fixture.h"
#include "tests/common/test_util.h"

namespace ckpt::background_save_test {
namespace {

using testing::TempDir;

Node state_of(std::vector<float>* w, std::vector<float>* b) {
  Node root;
  root.child("model").tensors["w"] = Tensor::borrow(
      DType::kFloat32, {static_cast<int64_t>(w->size())}, w->data(), w->size() * sizeof(float));
  root.child("model").tensors["b"] = Tensor::borrow(
      DType::kFloat32, {static_cast<int64_t>(b->size())}, b->data(), b->size() * sizeof(float));
  return root;
}

// write_rank + commit + retention, the job a single-process Checkpointer runs.
store::BackgroundJob save_job(Env* env, const std::string& run, int64_t step) {
  store::BackgroundJob job;
  job.label = "step " + std::to_string(step);
  job.write = [=](Node* root, const store::SubmitReport&) -> Status {
    root->attrs["step"] = step;
    return testing::write_and_commit(env, run, step, root, testing::TinySave::keeping(2));
  };
  return job;
}

std::vector<float> read_w(const std::string& run, int64_t step) {
  auto root = store::read_rank(Env::posix(), path_join(run, step_dir_name(step)), 0);
  REQUIRE(root.is_ok());
  const Tensor* t = root->find_child("model")->find_tensor("w");
  REQUIRE(t != nullptr);
  const float* p = static_cast<const float*>(t->data);
  return std::vector<float>(p, p + t->nbytes / sizeof(float));
}

// A job that blocks until released: makes "still in flight" deterministic.
struct Gate {
  std::mutex mu;
  std::condition_variable cv;
  bool open = false;
  void release() {
    std::lock_guard<std::mutex> l(mu);
    open = true;
    cv.notify_all();
  }
  void pass() {
    std::unique_lock<std::mutex> l(mu);
    cv.wait(l, [&] { return open; });
  }
};

TEST_CASE("the file holds the state at submit, not what the caller wrote after", "[store]") {
  TempDir tmp;
  std::vector<float> w(100000, 1.0f), b(10, 2.0f);
  store::BackgroundSaver saver;
  Gate gate;
  store::BackgroundJob job = save_job(Env::posix(), tmp.path(), 10);
  auto write = job.write;
  job.write = [&gate, write](Node* root, const store::SubmitReport& r) {
    gate.pass();  // the caller changes its memory before a byte is written
    return write(root, r);
  };
  REQUIRE(saver.submit(state_of(&w, &b), std::move(job)).is_ok());
  REQUIRE(saver.in_flight());
  std::fill(w.begin(), w.end(), 9.0f);  // the next optimizer step
  gate.release();
  REQUIRE(saver.wait().is_ok());
  REQUIRE_FALSE(saver.in_flight());
  const std::vector<float> got = read_w(tmp.path(), 10);
  REQUIRE(got == std::vector<float>(100000, 1.0f));
  REQUIRE(store::verify_checkpoint(Env::posix(), path_join(tmp.path(), step_dir_name(10)))
              .problems.empty());
}

TEST_CASE("the snapshot arena is allocated once per state and grows only with it", "[store]") {
  TempDir tmp;
  std::vector<float> w(50000, 1.0f), b(10, 2.0f);
  store::BackgroundSaver saver;
  REQUIRE(saver.submit(state_of(&w, &b), save_job(Env::posix(), tmp.path(), 10)).is_ok());
  REQUIRE(saver.wait().is_ok());
  const store::BackgroundSaverStats first = saver.stats();
  REQUIRE(first.arena_allocations == 1);
  REQUIRE(first.arena_capacity >= (50000 + 10) * sizeof(float));
  REQUIRE(first.arena_used == first.arena_capacity);
  for (int64_t step = 20; step <= 40; step += 10) {
    std::fill(w.begin(), w.end(), static_cast<float>(step));
    REQUIRE(saver.submit(state_of(&w, &b), save_job(Env::posix(), tmp.path(), step)).is_ok());
    REQUIRE(saver.wait().is_ok());
    REQUIRE(saver.stats().arena_allocations == 1);  // not reallocated for the same state
    REQUIRE(saver.stats().arena_capacity == first.arena_capacity);
    REQUIRE(read_w(tmp.path(), step) == std::vector<float>(50000, static_cast<float>(step)));
  }
  std::vector<float> bigger(80000, 5.0f);
  REQUIRE(saver.submit(state_of(&bigger, &b), save_job(Env::posix(), tmp.path(), 50)).is_ok());
  REQUIRE(saver.wait().is_ok());
  REQUIRE(saver.stats().arena_allocations == 2);
  REQUIRE(saver.stats().arena_capacity >= 80000 * sizeof(float));
  REQUIRE(saver.stats().submitted == 5);
}

TEST_CASE("tied tensors share one copy in the arena", "[store]") {
  std::vector<float> w(1000, 3.0f);
  Node root;
  root.child("model").tensors["a"] = Tensor::borrow(DType::kFloat32, {1000}, w.data(), 4000);
  root.child("model").tensors["b"] = Tensor::borrow(DType::kFloat32, {1000}, w.data(), 4000);
  store::SnapshotArena arena;
  REQUIRE(arena.snapshot(&root).is_ok());
  const Node& m = *root.find_child("model");
  REQUIRE(m.find_tensor("a")->data == m.find_tensor("b")->data);
  REQUIRE(m.find_tensor("a")->data != w.data());
  REQUIRE(arena.used() == 4032);  // one copy of 4000 bytes, rounded up to 64
}

TEST_CASE("two submits in a row: the second waits for the first, both commit", "[store]") {
  TempDir tmp;
  std::vector<float> w(1000, 1.0f), b(10, 2.0f);
  store::BackgroundSaver saver;
  Gate gate;
  store::BackgroundJob first = save_job(Env::posix(), tmp.path(), 10);
  auto write = first.write;
  first.write = [&gate, write](Node* root, const store::SubmitReport& r) {
    gate.pass();
    return write(root, r);
  };
  REQUIRE(saver.submit(state_of(&w, &b), std::move(first)).is_ok());
  std::fill(w.begin(), w.end(), 7.0f);
  std::thread opener([&] { gate.release(); });  // lets the first finish while submit waits
  store::SubmitReport report;
  REQUIRE(saver.submit(state_of(&w, &b), save_job(Env::posix(), tmp.path(), 20), &report).is_ok());
  opener.join();
  REQUIRE(report.waited);
  REQUIRE(report.snapshot_bytes >= 1010 * sizeof(float));
  REQUIRE(saver.wait().is_ok());
  REQUIRE(read_w(tmp.path(), 10) == std::vector<float>(1000, 1.0f));
  REQUIRE(read_w(tmp.path(), 20) == std::vector<float>(1000, 7.0f));
  REQUIRE(store::find_latest(Env::posix(), tmp.path())->step == 20);
}

TEST_CASE("a background failure is returned once, by the next submit or wait", "[store]") {
  TempDir tmp;
  std::vector<float> w(1000, 1.0f), b(10, 2.0f);
  FaultInjectionEnv env(Env::posix());
  store::BackgroundSaver saver;
  REQUIRE(saver.submit(state_of(&w, &b), save_job(&env, tmp.path(), 10)).is_ok());
  REQUIRE(saver.wait().is_ok());
  env.fail_at(env.operations() + 3);  // the third operation of the next save
  REQUIRE(saver.submit(state_of(&w, &b), save_job(&env, tmp.path(), 20)).is_ok());

  SECTION("the next submit returns it and submits nothing") {
    Status s = saver.submit(state_of(&w, &b), save_job(Env::posix(), tmp.path(), 30));
    REQUIRE_FALSE(s.is_ok());
    REQUIRE(s.message().find("background save of step 20") != std::string::npos);
    REQUIRE_FALSE(saver.in_flight());
    REQUIRE(saver.wait().is_ok());  // returned once
    REQUIRE_FALSE(env.exists(path_join(tmp.path(), step_dir_name(30))));
  }
  SECTION("wait returns it") {
    Status s = saver.wait();
    REQUIRE_FALSE(s.is_ok());
    REQUIRE(s.message().find("background save of step 20") != std::string::npos);
    REQUIRE(saver.wait().is_ok());
  }
  REQUIRE(saver.stats().failed == 1);
  REQUIRE(store::find_latest(Env::posix(), tmp.path())->step == 10);
  // The saver is usable again.
  REQUIRE(saver.submit(state_of(&w, &b), save_job(Env::posix(), tmp.path(), 40)).is_ok());
  REQUIRE(saver.wait().is_ok());
  REQUIRE(store::find_latest(Env::posix(), tmp.path())->step == 40);
}

TEST_CASE("finish runs on the caller's thread after the write, and can fail", "[store]") {
  TempDir tmp;
  std::vector<float> w(10, 1.0f), b(10, 2.0f);
  store::BackgroundSaver saver;
  std::thread::id wrote_on, finished_on;
  store::BackgroundJob job;
  job.label = "step 5";
  job.write = [&](Node*, const store::SubmitReport&) {
    wrote_on = std::this_thread::get_id();
    return Status::ok();
  };
  job.finish = [&] {
    finished_on = std::this_thread::get_id();
    return io_error("commit barrier: timed out");
  };
  REQUIRE(saver.submit(state_of(&w, &b), std::move(job)).is_ok());
  Status s = saver.wait();
  REQUIRE(s.message() == "background save of step 5: commit barrier: timed out");
  REQUIRE(finished_on == std::this_thread::get_id());
  REQUIRE(wrote_on != std::this_thread::get_id());
}

TEST_CASE("an allocator that refuses fails the submit cleanly", "[store]") {
  std::vector<float> w(10, 1.0f), b(10, 2.0f);
  store::ArenaAllocator none;
  none.allocate = [](size_t) -> void* { return nullptr; };
  none.release = [](void*, size_t) {};
  store::BackgroundSaver saver(none);
  bool ran = false;
  store::BackgroundJob job;
  job.write = [&](Node*, const store::SubmitReport&) {
    ran = true;
    return Status::ok();
  };
  Status s = saver.submit(state_of(&w, &b), std::move(job));
  REQUIRE(s.code() == Code::kIoError);
  REQUIRE(s.message().find("snapshot buffer of 128 bytes") != std::string::npos);
  REQUIRE_FALSE(saver.in_flight());
  REQUIRE_FALSE(ran);
}

TEST_CASE("the destructor waits for the save in flight", "[store]") {
  TempDir tmp;
  std::vector<float> w(1000, 1.0f), b(10, 2.0f);
  {
    store::BackgroundSaver saver;
    REQUIRE(saver.submit(state_of(&w, &b), save_job(Env::posix(), tmp.path(), 10)).is_ok());
  }
  REQUIRE(store::find_latest(Env::posix(), tmp.path())->step == 10);
}

}  // namespace
}  // namespace ckpt::background_save_test
