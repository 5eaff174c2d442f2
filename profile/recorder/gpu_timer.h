// GpuPhaseTimer: the seam between the recorder and a GPU timing backend (CUDA events).
//
// The recorder calls begin/end on the training thread around GPU phases (h2d, forward, backward,
// optimizer, collective) and close_step when a step ends; its writer thread later calls collect to
// get that step's GPU seconds per phase, which may wait for the GPU — off the hot path.
// Implementations must allow begin/end/close_step on one thread concurrently with collect on
// another. profile/cuda/ holds the CUDA-event backend, built only when the CUDA toolkit is found;
// nothing here includes a CUDA header.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "profile/recorder/step_record.h"

namespace ckpt::profile {

class GpuPhaseTimer {
 public:
  virtual ~GpuPhaseTimer() = default;
  virtual void begin(Phase p) = 0;
  virtual void end(Phase p) = 0;
  // The events recorded since the previous close_step belong to `step`.
  virtual void close_step(int64_t step) = 0;
  // Seconds per phase of `step`, waiting for its events if needed; zeros for an unknown step.
  // Each step is collected once.
  virtual PhaseTimes collect(int64_t step) = 0;
};

// True for phases whose work is on the GPU and worth timing with events.
inline bool is_gpu_phase(Phase p) {
  return p == Phase::kH2D || p == Phase::kForward || p == Phase::kBackward ||
         p == Phase::kOptimizer || p == Phase::kCollective;
}

// The CUDA-event timer on the current device, recording on `cuda_stream` (a cudaStream_t passed as
// void* so this header needs no CUDA; nullptr = the legacy default stream; pass the stream the
// training work runs on, e.g. at::cuda::getCurrentCUDAStream().stream()). Returns nullptr with
// `why` set when this build has no CUDA support or no device is present.
std::unique_ptr<GpuPhaseTimer> make_cuda_phase_timer(void* cuda_stream, std::string* why);

}  // namespace ckpt::profile
