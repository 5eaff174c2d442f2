// The libtorch release ckpt was compiled against, for the producer attributes of a checkpoint
// (root attr `libtorch_version`). Stateless; thread-safe.
#pragma once

#include <string>

namespace ckpt::torch_adapter {

// "1.13.0", "2.11.0", ... (TORCH_VERSION of the headers used at build time).
std::string libtorch_version();

}  // namespace ckpt::torch_adapter
