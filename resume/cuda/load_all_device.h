// load_all_device: every tensor of one committed checkpoint through the GPU restore path
// (DeviceRestorer) into device buffers it allocates and frees — the `--device cuda:N` side of
// `ckpt load-bench`. Without a usable GPU: kUnsupported with one line that says why.
#pragma once

#include "resume/load_all.h"

namespace ckpt::resume::cuda {

Result<LoadAllStats> load_all_device(Env* env, const std::string& step_dir, int device,
                                     const LoadAllOptions& options);

}  // namespace ckpt::resume::cuda
