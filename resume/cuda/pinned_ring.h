// PinnedRing: a fixed set of reused page-locked host buffers that I/O threads fill and a CUDA copy
// engine drains. Pinning costs about as much as the copy it enables (1–2 GB/s), so the ring is
// allocated once and reused across chunks and across restores.
//
// Protocol for one buffer (states Free → Filling → Copying → Free):
//   1. acquire(): a worker takes a Free buffer. With none Free it takes the oldest Copying one,
//      waits outside the lock for that buffer's event (its device copies have completed), and
//      reuses it; with none Copying either (every buffer is Filling) it waits for one to move.
//   2. The worker reads file bytes into the buffer and enqueues cudaMemcpyAsync(s) from it on its
//      own stream, then mark_copying(): the buffer's event is recorded on that stream.
//   3. The worker hashes the bytes while the DMA runs (both only read the buffer), then release():
//      the buffer joins the Copying FIFO and may be reused once its event has fired.
//   4. drain() waits for every event; the destructor drains quietly, then frees events and memory.
// A buffer is never written while a copy may still read it: reuse always waits for the event
// recorded after the buffer's last copy. With at least as many buffers as workers step 1 never
// waits forever. Thread-safe: any worker may call acquire/mark_copying/release concurrently.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <memory>
#include <mutex>
#include <vector>

#include "resume/cuda/cuda_status.h"

namespace ckpt::resume::cuda {

class PinnedRing {
 public:
  // `count` buffers of `bytes` each, on the current device's context. kIoError naming the
  // allocation that failed (pinned memory is a scarce resource).
  static Result<std::unique_ptr<PinnedRing>> create(size_t count, size_t bytes);
  ~PinnedRing();
  PinnedRing(const PinnedRing&) = delete;
  PinnedRing& operator=(const PinnedRing&) = delete;

  size_t count() const { return slots_.size(); }
  size_t buffer_bytes() const { return bytes_; }

  // Step 1. Returns a buffer index; kIoError when waiting on a recycled buffer's event failed.
  Result<size_t> acquire();
  unsigned char* data(size_t index) const { return slots_[index].buffer.data(); }
  // Step 2: records the buffer's event on `stream` after the copies enqueued from it.
  Status mark_copying(size_t index, cudaStream_t stream);
  // Step 3: the worker is done with the buffer. `copied` = mark_copying() succeeded (otherwise
  // the buffer is Free at once: no copy reads it).
  void release(size_t index, bool copied);
  // Step 4: waits for every outstanding copy; the first error.
  Status drain();

 private:
  enum class State { kFree, kFilling, kCopying };
  struct Slot {
    PinnedBuffer buffer;
    CudaEvent event;
    State state = State::kFree;
  };
  PinnedRing() = default;

  size_t bytes_ = 0;
  std::vector<Slot> slots_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<size_t> copying_;  // oldest first
};

}  // namespace ckpt::resume::cuda
