// The one place where ckpt's libtorch adapter deals with differences between libtorch releases
// (1.13 as shipped by Debian, 2.x on GPU machines). Every other file in ckpt/torch calls these
// helpers instead of testing TORCH_VERSION_* itself, so a new release means editing this file only.
//
// Private to ckpt/torch's .cc files (it pulls in heavy torch headers); not installed for users.
// Stateless; thread-safe.
#pragma once

#include <torch/optim/optimizer.h>
#include <torch/version.h>

#include <sstream>
#include <string>
#include <type_traits>

#define CKPT_TORCH_AT_LEAST(major, minor) \
  (TORCH_VERSION_MAJOR > (major) ||       \
   (TORCH_VERSION_MAJOR == (major) && TORCH_VERSION_MINOR >= (minor)))

// float8 (e5m2, e4m3fn) arrived in 2.1; the unsigned 16/32/64-bit dtypes in 2.3.
#define CKPT_TORCH_HAS_FLOAT8 CKPT_TORCH_AT_LEAST(2, 1)
#define CKPT_TORCH_HAS_UINT_WIDE CKPT_TORCH_AT_LEAST(2, 3)

namespace ckpt::torch_adapter::compat {

// The key type of Optimizer::state(): libtorch 1.x keys per-parameter state by the *printed*
// TensorImpl address (std::string, produced with an ostream exactly like c10::guts::to_string);
// 2.x keys it by the TensorImpl* itself. Deducing the key type from the map keeps us correct on
// whichever release we compile against without knowing the exact release of the change.
using StateMap = std::decay_t<decltype(std::declval<torch::optim::Optimizer&>().state())>;
using StateKey = typename StateMap::key_type;

// A template so that only the branch matching this release's key type is instantiated.
template <typename Key = StateKey>
Key state_key(const torch::Tensor& param) {
  c10::TensorImpl* impl = param.unsafeGetTensorImpl();
  if constexpr (std::is_same_v<Key, std::string>) {
    std::ostringstream os;
    os << impl;
    return os.str();
  } else {
    return static_cast<Key>(impl);
  }
}

}  // namespace ckpt::torch_adapter::compat
