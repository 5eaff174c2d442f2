// The device side of `ckpt load-bench --device cuda:N`, loaded only when that command asks for a
// device. The CUDA path (resume/cuda, linked against libcudart) lives in a module of its own,
// libckpt_load_bench_cuda.so, beside the executable (or in ../lib/ckpt/ once installed): the `ckpt`
// executable links no CUDA library, so every other command starts without loading libcudart and
// works on a machine that has none.
//
// The module exports one C-linkage entry point, kLoadAllDeviceSymbol, of type LoadAllDeviceFn;
// both sides are built from these headers by the same compiler in the same build.
#pragma once

#include <string>

#include "ckpt/base/status.h"
#include "ckpt/io/env.h"
#include "resume/load_all.h"

namespace ckpt::cli {

using LoadAllDeviceFn = void (*)(Env* env, const std::string& step_dir, int device,
                                 const resume::LoadAllOptions& options,
                                 Result<resume::LoadAllStats>* out);
inline constexpr const char* kLoadAllDeviceSymbol = "ckpt_load_all_device";
inline constexpr const char* kLoadBenchCudaModule = "libckpt_load_bench_cuda.so";

// resume::cuda::load_all_device through the module, opened on first use (dlopen). Unsupported
// "cuda:N: ..." when the module is absent (ckpt built without the CUDA toolkit) or cannot be
// loaded (naming it and the loader's reason, e.g. no libcudart on this machine).
Result<resume::LoadAllStats> load_all_device_lazily(Env* env, const std::string& step_dir,
                                                    int device,
                                                    const resume::LoadAllOptions& options);

}  // namespace ckpt::cli
