// make_cuda_phase_timer for builds without the CUDA toolkit: GPU phases are timed on the host only.
#include "profile/recorder/gpu_timer.h"

namespace ckpt::profile {

std::unique_ptr<GpuPhaseTimer> make_cuda_phase_timer(void* /*cuda_stream*/, std::string* why) {
  if (why != nullptr) *why = "this build of ckpt has no CUDA support; GPU phases use host timing";
  return nullptr;
}

}  // namespace ckpt::profile
