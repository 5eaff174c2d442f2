// A Python-written optimizer (torch's state_dict layout, ckpt/format/torch_layout.h) read into
// the libtorch adapter's /optimizer layout (optimizer_state.h), so that restore_optimizer can
// restore a checkpoint written by `ckpt.Checkpointer` in Python. The conversion itself is the
// core's (ckpt::optimizer_from_torch_layout); this adds what only the live objects know: the
// parameters' names (from the module, in the optimizer's param-group order, as torch numbers
// them) and the optimizer's type. Stateless.
#pragma once

#include "ckpt/base/status.h"
#include "ckpt/format/torch_layout.h"
#include "ckpt/format/tree.h"
#include "ckpt/torch/fwd.h"

namespace ckpt::torch_adapter {

using ckpt::is_torch_optimizer_layout;

// The adapter layout of `in` for `opt` over `m`. The state tensors are shared with `in` (which
// must outlive the result); each torch "step" (a 0-d tensor, or a number) becomes the int64
// attribute. Fails (kMismatch) naming a parameter index or group the live optimizer lacks.
Result<Node> optimizer_from_torch_layout(const Node& in, const torch::optim::Optimizer& opt,
                                         const torch::nn::Module& m);

}  // namespace ckpt::torch_adapter
