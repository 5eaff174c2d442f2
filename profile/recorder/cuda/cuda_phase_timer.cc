// The CUDA-event GpuPhaseTimer: a pair of events around every GPU phase, on the caller's stream.
//
// Events come from a pool so the hot path never calls cudaEventCreate. begin/end/close_step run on
// the training thread, collect on the recorder's writer thread; one mutex guards the pool and the
// per-step lists (cudaEventRecord is a few hundred ns anyway, so the lock is not the cost).
// Built only when find_package(CUDAToolkit) succeeds; talks to the runtime API, no kernels.
#include <cuda_runtime_api.h>

#include <map>
#include <mutex>
#include <vector>

#include "profile/recorder/gpu_timer.h"

namespace ckpt::profile {

namespace {

class CudaPhaseTimer final : public GpuPhaseTimer {
 public:
  explicit CudaPhaseTimer(cudaStream_t stream) : stream_(stream) {}
  ~CudaPhaseTimer() override {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [step, spans] : closed_) release_all(spans);
    release_all(open_);
    for (cudaEvent_t e : pool_) cudaEventDestroy(e);
  }

  void begin(Phase p) override {
    std::lock_guard<std::mutex> lock(mu_);
    Span s{p, take(), nullptr};
    if (s.start == nullptr) return;
    cudaEventRecord(s.start, stream_);
    open_.push_back(s);
  }

  void end(Phase p) override {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto it = open_.rbegin(); it != open_.rend(); ++it) {
      if (it->phase == p && it->stop == nullptr) {
        it->stop = take();
        if (it->stop != nullptr) cudaEventRecord(it->stop, stream_);
        return;
      }
    }
  }

  void close_step(int64_t step) override {
    std::lock_guard<std::mutex> lock(mu_);
    closed_[step] = std::move(open_);
    open_.clear();
  }

  PhaseTimes collect(int64_t step) override {
    PhaseTimes out{};
    std::vector<Span> spans;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = closed_.find(step);
      if (it == closed_.end()) return out;
      spans = std::move(it->second);
      closed_.erase(it);
    }
    for (const Span& s : spans) {
      if (s.start == nullptr || s.stop == nullptr) continue;
      float ms = 0;
      if (cudaEventSynchronize(s.stop) == cudaSuccess &&
          cudaEventElapsedTime(&ms, s.start, s.stop) == cudaSuccess) {
        out[index(s.phase)] += double(ms) * 1e-3;
      }
    }
    std::lock_guard<std::mutex> lock(mu_);
    release_all(spans);
    return out;
  }

 private:
  struct Span {
    Phase phase;
    cudaEvent_t start;
    cudaEvent_t stop;
  };

  cudaEvent_t take() {
    if (!pool_.empty()) {
      cudaEvent_t e = pool_.back();
      pool_.pop_back();
      return e;
    }
    cudaEvent_t e = nullptr;
    if (cudaEventCreate(&e) != cudaSuccess) return nullptr;
    return e;
  }

  void release_all(std::vector<Span>& spans) {
    for (Span& s : spans) {
      if (s.start != nullptr) pool_.push_back(s.start);
      if (s.stop != nullptr) pool_.push_back(s.stop);
    }
    spans.clear();
  }

  cudaStream_t stream_;
  std::mutex mu_;
  std::vector<cudaEvent_t> pool_;
  std::vector<Span> open_;
  std::map<int64_t, std::vector<Span>> closed_;
};

}  // namespace

std::unique_ptr<GpuPhaseTimer> make_cuda_phase_timer(void* cuda_stream, std::string* why) {
  int devices = 0;
  cudaError_t err = cudaGetDeviceCount(&devices);
  if (err != cudaSuccess || devices == 0) {
    if (why != nullptr) {
      *why = std::string("no CUDA device (") +
             (err != cudaSuccess ? cudaGetErrorString(err) : "0 devices") +
             "); GPU phases use host timing";
    }
    return nullptr;
  }
  return std::make_unique<CudaPhaseTimer>(static_cast<cudaStream_t>(cuda_stream));
}

}  // namespace ckpt::profile
