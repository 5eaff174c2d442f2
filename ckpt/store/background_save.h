// Non-blocking save, the core half (docs/format.md §2, "Non-blocking save"): a SnapshotArena
// that copies a checkpoint tree's tensor bytes into memory it owns, and a BackgroundSaver that
// runs the rest of the save (write_rank → commit → retention → journal, composed by the caller)
// on one background thread. No torch, no CUDA: the torch adapter and the Python binding build
// the tree and the job.
//
// Protocol of one submit():
//   1. wait for the save in flight, if any, and collect it: its `finish` step runs on the
//      caller's thread; a failure is returned and nothing new is submitted (it is never lost);
//   2. snapshot: every tensor of the tree (borrowing caller memory) is copied into the arena and
//      the tree is rewritten to borrow from the arena; from here on the caller may change its
//      tensors (the next optimizer step);
//   3. hand the tree and the job to the background thread and return.
// The stall the caller sees is 1 (zero unless it saves faster than the disk writes) plus 2.
//
// Memory: the arena holds one copy of the state's tensor bytes (each tensor rounded up to 64
// bytes), allocated on the first save, reused by every later one and grown (reallocated to the
// new size) only when the state no longer fits. It is freed with the saver. Its memory comes from
// an ArenaAllocator: ckpt::HostMemory (ckpt/io/host_memory.h) by default; a CUDA-aware caller
// passes pinned memory (resume/cuda's business — not wired yet, the CPU path is what runs here).
//
// Thread-safety: submit(), wait() and the accessors are called from one thread (the training
// thread); the job's `write` runs on the background thread and must only touch what it owns or
// what is safe to share (the Env, a mutex-guarded journal). At most one save is in flight.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include "ckpt/base/status.h"
#include "ckpt/format/tree.h"

namespace ckpt::store {

// Where snapshot memory comes from. Empty functions = ckpt::HostMemory (page-aligned, zeroed).
struct ArenaAllocator {
  std::function<void*(size_t bytes)> allocate;  // nullptr on failure
  std::function<void(void* p, size_t bytes)> release;
};

class SnapshotArena {
 public:
  explicit SnapshotArena(ArenaAllocator alloc = {});
  ~SnapshotArena();
  SnapshotArena(const SnapshotArena&) = delete;
  SnapshotArena& operator=(const SnapshotArena&) = delete;

  // Copies the bytes of every tensor of `root` into the arena (growing it first when the state
  // does not fit) and points each tensor at its copy, dropping its keepalive. Tensors that share
  // the same bytes (tied weights, aliases) share one copy. On failure (the allocator refused)
  // the tree is unchanged. Large states are copied by several threads.
  Status snapshot(Node* root);

  uint64_t capacity() const { return capacity_; }        // bytes allocated
  uint64_t used() const { return used_; }                // bytes the last snapshot took
  uint64_t allocations() const { return allocations_; }  // times memory was (re)allocated

 private:
  ArenaAllocator alloc_;
  char* base_ = nullptr;
  uint64_t capacity_ = 0;
  uint64_t used_ = 0;
  uint64_t allocations_ = 0;
};

// What one submit() cost the caller.
struct SubmitReport {
  double waited_seconds = 0;    // for the previous save to finish (0 when none was in flight)
  bool waited = false;          // a previous save was still in flight
  double snapshot_seconds = 0;  // copying the tensor bytes
  uint64_t snapshot_bytes = 0;
};

struct BackgroundJob {
  // "step 120": prefixes a failure ("background save of step 120: ...").
  std::string label;
  // Runs on the background thread with the snapshot tree; its Status is the save's.
  std::function<Status(Node* root, const SubmitReport& report)> write;
  // Runs on the caller's thread when the save is collected (next submit, wait(), destructor of
  // the owner) after `write` succeeded: e.g. the barrier and commit of world_size > 1, which
  // must not run on a second thread beside the training thread's collectives. May be empty.
  std::function<Status()> finish;
};

struct BackgroundSaverStats {
  uint64_t arena_capacity = 0;
  uint64_t arena_used = 0;
  uint64_t arena_allocations = 0;
  uint64_t submitted = 0;
  uint64_t failed = 0;
};

class BackgroundSaver {
 public:
  explicit BackgroundSaver(ArenaAllocator alloc = {});
  // Waits for the save in flight (its `finish` is not run and a failure is dropped: owners that
  // must not lose it call wait() first, as Checkpointer's destructor does).
  ~BackgroundSaver();
  BackgroundSaver(const BackgroundSaver&) = delete;
  BackgroundSaver& operator=(const BackgroundSaver&) = delete;

  // The protocol above. On success the save runs in the background; on failure (the previous
  // save failed, or the snapshot could not be allocated) nothing was submitted.
  Status submit(Node root, BackgroundJob job, SubmitReport* report = nullptr);
  // Blocks until the save in flight is done, runs its `finish`, and returns its Status (ok when
  // none was in flight). Each failure is returned exactly once.
  Status wait();
  bool in_flight() const { return in_flight_; }
  BackgroundSaverStats stats() const;

 private:
  void run();  // the background thread

  SnapshotArena arena_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool has_work_ = false;  // guarded by mu_: a job for the thread
  bool done_ = false;      // guarded by mu_: the job finished, status_ holds its Status
  bool stop_ = false;      // guarded by mu_
  Status status_;          // guarded by mu_
  Node root_;              // owned by the thread while a job runs
  BackgroundJob job_;
  SubmitReport report_;
  bool in_flight_ = false;  // caller's thread only
  uint64_t submitted_ = 0, failed_ = 0;
  std::thread thread_;  // started on the first submit
};

}  // namespace ckpt::store
