#include "ckpt/torch/version.h"

#include <torch/version.h>

namespace ckpt::torch_adapter {

std::string libtorch_version() { return TORCH_VERSION; }

}  // namespace ckpt::torch_adapter
