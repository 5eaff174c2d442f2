// Forward declarations of the libtorch types that the adapter's headers (and
// train/checkpointer.h, which training code includes) name only by reference, so that those
// headers need no torch header. Defined by <torch/torch.h> in the .cc files that use them.
#pragma once

#include <cstdint>

namespace at {
class Tensor;
}  // namespace at
namespace c10 {
enum class ScalarType : int8_t;
}  // namespace c10
namespace torch {
using at::Tensor;
namespace nn {
class Module;
}  // namespace nn
namespace optim {
class Optimizer;
}  // namespace optim
}  // namespace torch
