// Structural detection: finds the components of the completeness contract in a pickled value
// tree, by shape rather than by key names, because real checkpoints name things every which way
// (`optimizer`, `optim`, `optimizer_state_dict`, `optimizer_states[0]`...).
//
//   optimizer   a dict with `state` (dict) and `param_groups` (list of dicts)
//   scheduler   a dict with `last_epoch` and `base_lrs`, or ReduceLROnPlateau's shape
//   grad scaler a dict with `scale`, `growth_factor`, `backoff_factor`, `growth_interval`
//   rng_cpu     a 1-D uint8 tensor of 5056 bytes; numpy ('MT19937', uint32[624], ...) and
//               Python (3, (625 ints), gauss) tuples are noted alongside
//   rng_cuda    1-D uint8 tensors of 16, 8 or 816 bytes next to a CPU state or under a cuda key
//   loader      torchdata StatefulDataLoader state, Lightning loops (+ combined_loader), a cursor
//               dict with an integer epoch and batch_idx and/or samples_seen
//   model       the largest dict whose values are all tensors (not an RNG dict)
//   counters    integer global step / epoch entries next to the components (these are names)
// Pickled nn.Module, optimizer and scheduler objects reached through dicts and lists are read as
// their state_dicts (pickled_objects.h); detection never descends into any other opaque object
// (a torch 1.13 OneCycleLR pickles getattr(<itself with a whole optimizer>, ...); that is not
// the checkpoint's optimizer). Walks are bounded (visited set, depth and
// visit caps), so shared and cyclic trees are safe. Pure; thread-safe on distinct views.
#pragma once

#include <functional>
#include <optional>
#include <string>

#include "verify/formats/view.h"
#include "verify/pickle/value.h"

namespace ckpt::verify {

// Reads the value of a one-element tensor (an optimizer `step`), or nullopt. Readers supply it
// because only they know where tensor bytes live; a few bytes per call.
using ScalarResolver = std::function<std::optional<double>(const TensorRecord&)>;

// The bytes of a model tensor (TensorInfo::values), or null; set only when they are wanted.
using ValuesReader = std::function<std::shared_ptr<const std::string>(const TensorRecord&)>;

struct DetectContext {
  std::string source;  // the file the tree came from ("optimizer.pt"), used in evidence
  ScalarResolver resolve;
  ValuesReader values = nullptr;  // a default: older aggregate initialisers stay valid
};

// Fills every part of `view` that is not found yet with what `root` holds; records tensor
// devices in view->devices.
void detect_components(const Value& root, const DetectContext& ctx, CheckpointView* view);

// The `ckpt inspect` tree of a value; `budget` caps the number of nodes emitted (decremented).
InspectNode inspect_value(const Value& v, const std::string& name, size_t* budget);

// A digest (16 hex digits, XXH3-64) of a value's canonical text: kinds, keys, scalars, strings and
// tensor dtypes/shapes, bounded in depth and size. Equal values give equal digests.
std::string value_digest(const Value& v);

// The shapes detection recognises, for code that routes components by the same rules
// (verify/convert): an optimizer / scheduler / grad-scaler state dict, the 5056-byte CPU
// generator state, a 16/8/816-byte CUDA generator state.
bool is_optimizer_state(const Value& dict);
bool is_scheduler_state(const Value& dict);
bool is_grad_scaler_state(const Value& dict);
bool is_cpu_rng_state(const Value* v);
bool is_cuda_rng_state(const Value* v);
bool is_python_rng_state(const Value* v);  // random.getstate(): (3, (625 ints), gauss)
bool is_numpy_rng_state(const Value* v);   // ('MT19937', uint32[624], pos, has_gauss, cached)

// TensorInfo of a tensor record found at `name` in `file`.
TensorInfo tensor_info(const TensorRecord& t, const std::string& name, const std::string& file);

}  // namespace ckpt::verify
