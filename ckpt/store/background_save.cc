#include "ckpt/store/background_save.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "ckpt/io/host_memory.h"

namespace ckpt::store {
namespace {

constexpr uint64_t kAlign = 64;
constexpr uint64_t kPiece = 16u << 20;          // unit of work of the parallel copy
constexpr uint64_t kParallelAbove = 64u << 20;  // smaller states are copied by one thread

uint64_t round_up(uint64_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

void collect(Node& node, std::vector<Tensor*>* out) {
  for (auto& [name, t] : node.tensors) out->push_back(&t);
  for (auto& [name, child] : node.children) collect(child, out);
}

struct Copy {
  char* dst;
  const char* src;
  uint64_t n;
};

// Copies the pieces with up to 4 threads for large states (memcpy of one thread is bound by one
// core's memory bandwidth; more threads than that buy nothing on the machines measured).
void copy_all(const std::vector<Copy>& copies, uint64_t total) {
  std::vector<Copy> pieces;
  for (const Copy& c : copies) {
    for (uint64_t off = 0; off < c.n; off += kPiece) {
      pieces.push_back({c.dst + off, c.src + off, std::min(kPiece, c.n - off)});
    }
  }
  const unsigned threads =
      total > kParallelAbove ? std::clamp(std::thread::hardware_concurrency(), 1u, 4u) : 1u;
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i = next++; i < pieces.size(); i = next++) {
      std::memcpy(pieces[i].dst, pieces[i].src, pieces[i].n);
    }
  };
  std::vector<std::thread> pool;
  for (unsigned k = 1; k < threads; ++k) pool.emplace_back(work);
  work();
  for (auto& th : pool) th.join();
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

SnapshotArena::SnapshotArena(ArenaAllocator alloc) : alloc_(std::move(alloc)) {
  if (!alloc_.allocate || !alloc_.release) {
    // Host memory with huge pages where they fault in faster (ckpt/io/host_memory.h): the first
    // save's snapshot touches every page of it.
    auto held = std::make_shared<std::map<void*, HostMemory>>();
    alloc_.allocate = [held](size_t bytes) -> void* {
      auto m = HostMemory::allocate(bytes, /*populate=*/false, "the save's snapshot");
      if (!m.is_ok()) return nullptr;
      void* p = m->data();
      held->emplace(p, std::move(m).value());
      return p;
    };
    alloc_.release = [held](void* p, size_t) { held->erase(p); };
  }
}

SnapshotArena::~SnapshotArena() {
  if (base_ != nullptr) alloc_.release(base_, capacity_);
}

Status SnapshotArena::snapshot(Node* root) {
  std::vector<Tensor*> tensors;
  collect(*root, &tensors);
  // One copy per distinct (bytes, length): tied tensors and aliases share it.
  std::map<std::pair<const void*, size_t>, uint64_t> offset_of;
  uint64_t need = 0;
  for (const Tensor* t : tensors) {
    if (t->nbytes == 0 || t->data == nullptr) continue;
    auto [it, fresh] = offset_of.emplace(std::make_pair(t->data, t->nbytes), need);
    if (fresh) need += round_up(t->nbytes);
  }
  if (need > capacity_) {
    void* p = alloc_.allocate(need);
    if (p == nullptr) {
      return io_error("non-blocking save: cannot allocate a snapshot buffer of " +
                      std::to_string(need) + " bytes (one copy of the state)");
    }
    if (base_ != nullptr) alloc_.release(base_, capacity_);
    base_ = static_cast<char*>(p);
    capacity_ = need;
    ++allocations_;
  }
  std::vector<Copy> copies;
  copies.reserve(offset_of.size());
  for (const auto& [key, off] : offset_of) {
    copies.push_back({base_ + off, static_cast<const char*>(key.first), key.second});
  }
  copy_all(copies, need);
  for (Tensor* t : tensors) {
    if (t->nbytes == 0 || t->data == nullptr) {
      t->data = nullptr;
    } else {
      t->data = base_ + offset_of.at({t->data, t->nbytes});
    }
    t->keepalive.reset();
  }
  used_ = need;
  return Status::ok();
}

BackgroundSaver::BackgroundSaver(ArenaAllocator alloc) : arena_(std::move(alloc)) {}

BackgroundSaver::~BackgroundSaver() {
  {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return !has_work_ || done_; });
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void BackgroundSaver::run() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [&] { return stop_ || (has_work_ && !done_); });
    if (stop_) return;
    lock.unlock();
    Status s;
    try {
      s = job_.write(&root_, report_);
    } catch (const std::exception& e) {  // a job must not take the process down with it
      s = internal_error(std::string("exception: ") + e.what());
    }
    lock.lock();
    status_ = std::move(s);
    done_ = true;
    cv_.notify_all();
  }
}

Status BackgroundSaver::wait() {
  if (!in_flight_) return Status::ok();
  Status s;
  {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return done_; });
    s = std::move(status_);
    status_ = Status::ok();
    has_work_ = false;
    done_ = false;
  }
  in_flight_ = false;
  root_ = Node();  // the thread is idle: the tree is ours again
  BackgroundJob job = std::move(job_);
  job_ = BackgroundJob();
  if (s.is_ok() && job.finish) s = job.finish();
  if (s.is_ok()) return s;
  ++failed_;
  return s.with_context("background save of " + job.label);
}

Status BackgroundSaver::submit(Node root, BackgroundJob job, SubmitReport* report) {
  SubmitReport r;
  const auto t0 = std::chrono::steady_clock::now();
  r.waited = in_flight_;
  CKPT_RETURN_IF_ERROR(wait());
  r.waited_seconds = r.waited ? seconds_since(t0) : 0;
  const auto t1 = std::chrono::steady_clock::now();
  CKPT_RETURN_IF_ERROR(arena_.snapshot(&root));
  r.snapshot_seconds = seconds_since(t1);
  r.snapshot_bytes = arena_.used();
  if (report != nullptr) *report = r;
  if (!thread_.joinable()) thread_ = std::thread([this] { run(); });
  {
    std::lock_guard<std::mutex> lock(mu_);
    root_ = std::move(root);
    job_ = std::move(job);
    report_ = r;
    has_work_ = true;
    done_ = false;
  }
  in_flight_ = true;
  ++submitted_;
  cv_.notify_all();
  return Status::ok();
}

BackgroundSaverStats BackgroundSaver::stats() const {
  BackgroundSaverStats s;
  s.arena_capacity = arena_.capacity();
  s.arena_used = arena_.used();
  s.arena_allocations = arena_.allocations();
  s.submitted = submitted_;
  s.failed = failed_;
  return s;
}

}  // namespace ckpt::store
