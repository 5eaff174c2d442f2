// torch.optim's own state_dict layout, as the Python package stores it (python/ckpt/_tree.py:
// a group with attribute ckpt.kind, children state/<index> and param_groups/<g>), turned into the
// adapter's /optimizer layout (optimizer_state.h) so that restore_optimizer can read a checkpoint
// written by `ckpt.Checkpointer` in Python. Parameters are numbered as torch numbers them: in
// param-group order, which for the same model and optimizer is the order the live optimizer's
// parameters have here; their names come from the live module (capture_optimizer). Stateless.
#pragma once

#include "ckpt/base/status.h"
#include "ckpt/format/tree.h"
#include "ckpt/torch/fwd.h"

namespace ckpt::torch_adapter {

// Whether `in` is a torch.optim state_dict stored by the Python package.
bool is_torch_optimizer_layout(const Node& in);

// The adapter layout of `in` for `opt` over `m`. The state tensors are shared with `in` (which
// must outlive the result); each torch "step" (a 0-d tensor, or a number) becomes the int64
// attribute. Fails (kMismatch) naming a parameter index or group the live optimizer lacks.
Result<Node> optimizer_from_torch_layout(const Node& in, const torch::optim::Optimizer& opt,
                                         const torch::nn::Module& m);

}  // namespace ckpt::torch_adapter
