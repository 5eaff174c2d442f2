#include "resume/cuda/pinned_ring.h"

#include <exception>

namespace ckpt::resume::cuda {

Result<std::unique_ptr<PinnedRing>> PinnedRing::create(size_t count, size_t bytes) {
  if (count == 0 || bytes == 0) {
    return invalid_argument("pinned ring: need at least one buffer of at least one byte");
  }
  try {
    std::unique_ptr<PinnedRing> ring(new PinnedRing);
    ring->bytes_ = bytes;
    ring->slots_.resize(count);
    for (auto& slot : ring->slots_) {
      CKPT_RETURN_IF_ERROR(slot.buffer.allocate(bytes));
      CKPT_RETURN_IF_ERROR(slot.event.create());
    }
    return ring;
  } catch (const std::exception& e) {
    return internal_error(std::string("pinned ring: ") + e.what());
  }
}

PinnedRing::~PinnedRing() {
  // Copies may still read the buffers: wait before freeing them.
  for (auto& slot : slots_) {
    if (slot.state == State::kCopying) cudaEventSynchronize(slot.event.get());
  }
}

Result<size_t> PinnedRing::acquire() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    for (size_t i = 0; i < slots_.size(); ++i) {
      if (slots_[i].state == State::kFree) {
        slots_[i].state = State::kFilling;
        return i;
      }
    }
    if (!copying_.empty()) {
      const size_t i = copying_.front();
      copying_.pop_front();
      slots_[i].state = State::kFilling;  // ours now; nobody else will pick it
      lock.unlock();
      Status s = cuda_status(cudaEventSynchronize(slots_[i].event.get()),
                             "waiting for a pinned buffer's copy");
      if (!s.is_ok()) {
        release(i, false);
        return s;
      }
      return i;
    }
    cv_.wait(lock);
  }
}

Status PinnedRing::mark_copying(size_t index, cudaStream_t stream) {
  return cuda_status(cudaEventRecord(slots_[index].event.get(), stream), "cudaEventRecord");
}

void PinnedRing::release(size_t index, bool copied) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (copied) {
      slots_[index].state = State::kCopying;
      copying_.push_back(index);
    } else {
      slots_[index].state = State::kFree;
    }
  }
  cv_.notify_one();
}

Status PinnedRing::drain() {
  std::vector<size_t> pending;
  {
    std::lock_guard<std::mutex> lock(mu_);
    pending.assign(copying_.begin(), copying_.end());
  }
  Status first;
  for (size_t i : pending) {
    Status s = cuda_status(cudaEventSynchronize(slots_[i].event.get()),
                           "waiting for the last host-to-device copies");
    if (first.is_ok() && !s.is_ok()) first = s;
  }
  return first;
}

}  // namespace ckpt::resume::cuda
