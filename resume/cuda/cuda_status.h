// CUDA runtime errors as ckpt Status, and RAII owners for the CUDA objects resume/cuda uses
// (pinned host buffers, streams, events). Only resume/cuda includes this header: it pulls in the
// CUDA runtime API. Owners are move-only; destructors release quietly and never throw. Not
// thread-safe to move concurrently; using the owned handle from several threads is as safe as
// CUDA makes it (streams and events are).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <string>

#include "ckpt/base/status.h"

namespace ckpt::resume::cuda {

// ok for cudaSuccess; otherwise kIoError "WHAT: cudaErrorX: text" (device faults are I/O to us).
Status cuda_status(cudaError_t err, const std::string& what);

// A usable device exists. On false, *why (when given) is one line that says why, e.g.
// "no CUDA device: cudaGetDeviceCount: cudaErrorNoDevice: no CUDA-capable device is detected".
bool device_available(std::string* why);

class PinnedBuffer {
 public:
  PinnedBuffer() = default;
  ~PinnedBuffer();
  PinnedBuffer(PinnedBuffer&& o) noexcept;
  PinnedBuffer& operator=(PinnedBuffer&& o) noexcept;
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;
  // cudaHostAlloc of `bytes`; the previous buffer, if any, is freed first.
  Status allocate(size_t bytes);
  unsigned char* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  unsigned char* data_ = nullptr;
  size_t size_ = 0;
};

class CudaStream {
 public:
  CudaStream() = default;
  ~CudaStream();
  CudaStream(CudaStream&& o) noexcept;
  CudaStream& operator=(CudaStream&& o) noexcept;
  CudaStream(const CudaStream&) = delete;
  CudaStream& operator=(const CudaStream&) = delete;
  // A non-blocking stream on the current device.
  Status create();
  cudaStream_t get() const { return s_; }

 private:
  cudaStream_t s_ = nullptr;
};

class CudaEvent {
 public:
  CudaEvent() = default;
  ~CudaEvent();
  CudaEvent(CudaEvent&& o) noexcept;
  CudaEvent& operator=(CudaEvent&& o) noexcept;
  CudaEvent(const CudaEvent&) = delete;
  CudaEvent& operator=(const CudaEvent&) = delete;
  // An event without timing (cheapest to record and wait on).
  Status create();
  cudaEvent_t get() const { return e_; }

 private:
  cudaEvent_t e_ = nullptr;
};

}  // namespace ckpt::resume::cuda
