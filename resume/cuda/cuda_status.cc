#include "resume/cuda/cuda_status.h"

#include <utility>

namespace ckpt::resume::cuda {

Status cuda_status(cudaError_t err, const std::string& what) {
  if (err == cudaSuccess) return Status::ok();
  return io_error(what + ": " + cudaGetErrorName(err) + ": " + cudaGetErrorString(err));
}

bool device_available(std::string* why) {
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    cudaGetLastError();  // the error is not sticky: clear it so the next CUDA call does not see it
    if (why != nullptr)
      *why = "no CUDA device: " + cuda_status(err, "cudaGetDeviceCount").message();
    return false;
  }
  if (count == 0) {
    if (why != nullptr) *why = "no CUDA device: cudaGetDeviceCount reports 0 devices";
    return false;
  }
  return true;
}

PinnedBuffer::~PinnedBuffer() {
  if (data_ != nullptr) cudaFreeHost(data_);
}
PinnedBuffer::PinnedBuffer(PinnedBuffer&& o) noexcept
    : data_(std::exchange(o.data_, nullptr)), size_(std::exchange(o.size_, 0)) {}
PinnedBuffer& PinnedBuffer::operator=(PinnedBuffer&& o) noexcept {
  if (this != &o) {
    if (data_ != nullptr) cudaFreeHost(data_);
    data_ = std::exchange(o.data_, nullptr);
    size_ = std::exchange(o.size_, 0);
  }
  return *this;
}
Status PinnedBuffer::allocate(size_t bytes) {
  if (data_ != nullptr) cudaFreeHost(data_);
  data_ = nullptr;
  size_ = 0;
  void* p = nullptr;
  CKPT_RETURN_IF_ERROR(cuda_status(cudaHostAlloc(&p, bytes, cudaHostAllocPortable),
                                   "cudaHostAlloc(" + std::to_string(bytes) + " bytes)"));
  data_ = static_cast<unsigned char*>(p);
  size_ = bytes;
  return Status::ok();
}

CudaStream::~CudaStream() {
  if (s_ != nullptr) cudaStreamDestroy(s_);
}
CudaStream::CudaStream(CudaStream&& o) noexcept : s_(std::exchange(o.s_, nullptr)) {}
CudaStream& CudaStream::operator=(CudaStream&& o) noexcept {
  if (this != &o) {
    if (s_ != nullptr) cudaStreamDestroy(s_);
    s_ = std::exchange(o.s_, nullptr);
  }
  return *this;
}
Status CudaStream::create() {
  if (s_ != nullptr) cudaStreamDestroy(s_);
  s_ = nullptr;
  return cuda_status(cudaStreamCreateWithFlags(&s_, cudaStreamNonBlocking), "cudaStreamCreate");
}

CudaEvent::~CudaEvent() {
  if (e_ != nullptr) cudaEventDestroy(e_);
}
CudaEvent::CudaEvent(CudaEvent&& o) noexcept : e_(std::exchange(o.e_, nullptr)) {}
CudaEvent& CudaEvent::operator=(CudaEvent&& o) noexcept {
  if (this != &o) {
    if (e_ != nullptr) cudaEventDestroy(e_);
    e_ = std::exchange(o.e_, nullptr);
  }
  return *this;
}
Status CudaEvent::create() {
  if (e_ != nullptr) cudaEventDestroy(e_);
  e_ = nullptr;
  return cuda_status(cudaEventCreateWithFlags(&e_, cudaEventDisableTiming), "cudaEventCreate");
}

}  // namespace ckpt::resume::cuda
