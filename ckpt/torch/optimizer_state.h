// Capture and restore of a libtorch optimizer (Adam, AdamW, SGD, RMSprop, Adagrad) as the
// /optimizer component, with parameters named through the module that owns them, so a checkpoint
// can be restored into a freshly built model + optimizer whose TensorImpls are all different.
//
// Layout of /optimizer (the on-disk schema):
//   attrs     type         "adam" | "adamw" | "sgd" | "rmsprop" | "adagrad"
//             param_names  vector<string>: every parameter in group order, named by the module
//                          (matched by TensorImpl identity)
//   groups/<i>            one child per param group, i = "0", "1", ...
//             attrs: params (vector<string> names) and the type's hyperparameters, current lr
//             included: adam/adamw  lr, betas (vector<double>, 2), eps, weight_decay, amsgrad
//                       sgd         lr, momentum, dampening, weight_decay, nesterov
//                       rmsprop     lr, alpha, eps, weight_decay, momentum, centered
//                       adagrad     lr, lr_decay, weight_decay, initial_accumulator_value, eps
//   state/<param name>    one child per parameter that has state (libtorch creates it lazily
//                         at the first step with a gradient)
//             tensors: adam/adamw  exp_avg, exp_avg_sq, max_exp_avg_sq (only when amsgrad)
//                      sgd         momentum_buffer
//                      rmsprop     square_avg, momentum_buffer (momentum > 0),
//                                  grad_avg (centered)
//                      adagrad     sum
//             attrs:   step (int64) — adam, adamw, rmsprop, adagrad; libtorch's SGD keeps none.
// LBFGS (and any other optimizer) is refused with kUnsupported.
//
// Ownership: capture borrows the state tensors (see tensor_convert.h). Restore replaces the
// optimizer's per-parameter state with new tensors it allocates (on each parameter's device) and
// overwrites each group's hyperparameters. Not thread-safe with respect to the optimizer.
#pragma once

#include <string>
#include <vector>

#include "ckpt/base/status.h"
#include "ckpt/format/tree.h"
#include "ckpt/torch/fwd.h"

namespace ckpt::torch_adapter {

// Fills `out` (normally root.child("optimizer")). Fails (kInvalidArgument) naming the group and
// index of a parameter that `m` does not own; kUnsupported for LBFGS and unknown optimizers.
Status capture_optimizer(const torch::optim::Optimizer& opt, const torch::nn::Module& m, Node* out);

// Checks that `in` describes an optimizer of the same type over the same parameters (names, group
// structure) and that every state tensor matches its parameter's shape and dtype, then sets every
// group's hyperparameters (current lr included) and recreates the per-parameter state with the
// saved bytes and step counts; parameters without saved state get none. Nothing is changed
// unless every check passes. Errors name the parameter or group, expected vs actual.
Status restore_optimizer(const Node& in, torch::optim::Optimizer& opt, const torch::nn::Module& m);

// "adam", "adamw", ... for `opt`; kUnsupported for LBFGS and optimizers ckpt does not know.
Result<std::string> optimizer_type(const torch::optim::Optimizer& opt);

// One supported kind as optimizer_state.cc's table lists it (each fact once, for capture and
// restore alike): the schema above, per kind.
struct OptimizerKindInfo {
  std::string name;                          // the "type" attribute: "adam", ...
  std::vector<std::string> hyperparameters;  // group attributes besides "params", in read order
  std::vector<std::string> state_tensors;    // per-parameter tensors it can have, in order
  bool has_step = false;                     // per-parameter "step" attribute
};
// Every supported kind, in the schema's order.
std::vector<OptimizerKindInfo> optimizer_kinds();

}  // namespace ckpt::torch_adapter
