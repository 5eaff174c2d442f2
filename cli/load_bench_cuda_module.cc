// libckpt_load_bench_cuda.so: the one entry point of cli/load_bench_cuda.h over resume/cuda.
#include "cli/load_bench_cuda.h"
#include "resume/cuda/load_all_device.h"

extern "C" __attribute__((visibility("default"))) void ckpt_load_all_device(
    ckpt::Env* env, const std::string& step_dir, int device,
    const ckpt::resume::LoadAllOptions& options, ckpt::Result<ckpt::resume::LoadAllStats>* out) {
  *out = ckpt::resume::cuda::load_all_device(env, step_dir, device, options);
}
