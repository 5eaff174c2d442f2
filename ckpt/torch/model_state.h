// Capture and restore of a torch::nn::Module's parameters and buffers as the /model component.
//
// Layout of /model (the on-disk schema; docs/format.md quotes it):
//   tensors   one per parameter and buffer, keyed by the module's dotted name
//             ("encoder.0.weight"), parameters (named_parameters(recurse)) then buffers
//             (named_buffers(recurse)); undefined tensors are skipped, as libtorch does.
//   attrs     param_names  vector<string>  parameter names, in module order
//             buffer_names vector<string>  buffer names, in module order
//   aliases   when two names are the same tensor (same storage, offset, sizes and strides, e.g.
//             tied embedding and output weights), the second is stored with
//             Tensor::alias_of = the first name, its dtype and shape, and no bytes; the store
//             writes the bytes once. Two names on the same storage whose byte ranges overlap
//             without being the same view are refused (kUnsupported): restoring them in any
//             order would not reproduce the saved bytes.
//
// Ownership: capture borrows the module's tensors (see tensor_convert.h); the module must stay
// alive and untouched until the tree has been written. Restore copies into the module's existing
// tensors in place (so optimizers that hold them keep working) and never re-ties or re-allocates.
// Not thread-safe with respect to the module.
#pragma once

#include "ckpt/base/status.h"
#include "ckpt/format/tree.h"
#include "ckpt/torch/fwd.h"

namespace ckpt::torch_adapter {

// Fills `out` (normally root.child("model")) as described above. Fails on partially overlapping
// tensors, on dtypes the format cannot name, and on sparse tensors.
Status capture_model(const torch::nn::Module& m, Node* out);

// Strict restore: every parameter and buffer of `m` must be in `in` with the same dtype and
// shape, and `in` must hold no name `m` lacks; an alias in `in` must still be an alias in `m`.
// Errors (kMismatch / kNotFound) name the tensor and give expected (module) vs actual
// (checkpoint). Nothing is written unless every check passes.
Status restore_model(const Node& in, torch::nn::Module& m);

}  // namespace ckpt::torch_adapter
