// The two layouts a model or optimizer component can have in a rank file, and the one conversion
// between them, for every reader: the libtorch adapter (ckpt/torch/torch_layout.h), the Python
// package (ckpt._core's OpenRank.torch_layout) and the auditor (verify/ours). Pure: no torch, no
// HDF5, no I/O; stateless, thread-safe.
//
//   - The adapter layout, which the C++ Checkpointer writes (ckpt/torch/model_state.h,
//     optimizer_state.h): a model's tensors by dotted name with attributes param_names and
//     buffer_names; an optimizer's attributes type and param_names (every parameter in group
//     order), groups/<g> with params as parameter *names*, state/<param name> with the moments
//     and an int64 attribute step.
//   - torch's state_dict layout, as the Python package stores it (docs/python.md, "Storage";
//     python/ckpt/_tree.py): every group carries the attribute ckpt.kind (dict / intdict / list /
//     tuple); an optimizer holds state (an intdict: state/<index>, step a 0-d tensor or a number)
//     and param_groups (a list: param_groups/<g>, params as parameter *indices*).
// Parameters are numbered as torch numbers them: in param-group order, the order of param_names.
// Converted trees share their tensors (bytes, or metadata only) with the input.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "ckpt/base/status.h"
#include "ckpt/format/tree.h"

namespace ckpt {

// The attribute every group the Python package writes carries (and no adapter group does).
inline constexpr char kTorchLayoutKindAttr[] = "ckpt.kind";

// True when `group` was written from a Python state_dict (it carries ckpt.kind).
bool is_torch_layout(const Node& group);
// True when `group` is a torch.optim state_dict stored by the Python package.
bool is_torch_optimizer_layout(const Node& group);
// True when `group` is an optimizer in the adapter layout (groups/ and param_names).
bool is_adapter_optimizer_layout(const Node& group);

// The value of a one-element float32, float64 or int64 tensor whose bytes are present; nullopt
// for any other tensor (another dtype, several elements, metadata only).
std::optional<double> scalar_value(const Tensor& t);

// The chain of wrapper prefixes — "module." of DistributedDataParallel and DataParallel,
// "_orig_mod." of torch.compile, in any nesting — that every one of a module's state-dict `keys`
// starts with, leaving each a name of its own; "" when none. Without it the keys are the bare
// module's (the Python package's restore, `ckpt export`).
std::string module_wrapper_prefix(const std::vector<std::string>& keys);

// The adapter layout of a Python-written optimizer `in` whose parameters are, in torch's order,
// `param_names`; `type` is the optimizer's adapter type ("adamw", ...). Fails naming the index or
// state entry: kMismatch for a parameter index the live optimizer lacks, kCorrupt for a state key
// that is no index or a step that is not a whole number.
Result<Node> optimizer_from_torch_layout(const Node& in,
                                         const std::vector<std::string>& param_names,
                                         const std::string& type);

// What a component is when it is handed to torch (its live object's kind).
enum class TorchLayoutKind { kModule, kOptimizer };

// torch's layout of the adapter-layout component `in`, as the Python package would have stored
// it: a module without param_names / buffer_names; an optimizer with state/<index> (the step an
// int64 attribute) and param_groups/<g> (params as indices; every other list-valued
// hyperparameter, such as betas, a tuple). `sources`, when given, receives for every tensor of
// the result its path relative to the component ("state/0/exp_avg") -> its path in `in`
// ("state/fc.weight/exp_avg"). kCorrupt naming the entry for a state or group parameter that
// param_names does not list, or a group list with a gap.
Result<Node> to_torch_layout(const Node& in, TorchLayoutKind kind,
                             std::map<std::string, std::string>* sources = nullptr);

}  // namespace ckpt
