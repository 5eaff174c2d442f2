// Which parts of a foreign checkpoint become which ckpt component. The shapes are the audit's
// (verify/formats/detect.h): an optimizer is a dict with `state` and `param_groups`, a scheduler a
// dict with `last_epoch` and `base_lrs` (or the shapes of ReduceLROnPlateau, SequentialLR,
// ChainedScheduler, DeepSpeed's), a grad scaler a dict with `scale` and its growth parameters,
// the CPU generator a 5056-byte uint8 tensor, CUDA generators 16/8/816-byte uint8 tensors under a
// "cuda" key, the model the largest dict of tensors, counters integer `global_step` / `epoch`
// entries near the top. The first optimizer and scheduler found become /optimizer and
// /scheduler; later ones stay in /extra where they are (and are reported). Pure; no bytes read
// except the value of a one-element step tensor, through `scalar`.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "verify/convert/convert.h"
#include "verify/pickle/value.h"

namespace ckpt::verify::convert {

// One value tree of the input: a torch.save file, the tensors of the safetensors files, a JSON
// file, a DCP folder's state dict. `label` names it in paths ("optimizer.pt"); empty for a
// single-file input.
struct SourceTree {
  std::string label;
  const Value* root = nullptr;
};

struct Found {
  const Value* v = nullptr;
  size_t tree = 0;
  std::string path;               // "optimizer_states[0]" (source_path adds the tree's label)
  std::vector<std::string> keys;  // the same as group names: {"optimizer_states", "0"}
};

struct Routing {
  std::optional<Found> model, optimizer, scheduler, grad_scaler, rng_cpu;
  std::optional<Found> rng_python, rng_numpy;  // random.getstate(), np.random.get_state()
  std::vector<Found> rng_cuda;
  std::vector<Found> more;           // optimizers, schedulers and loader states that stay in /extra
  std::vector<std::string> more_as;  // what each of `more` is
  std::optional<int64_t> global_step;
  std::optional<double> epoch;
  std::string counters_path;  // where global_step was found
  size_t counters_tree = 0;
  // CUDA devices the input's tensors were saved from (highest "cuda:N" + 1; 0 when all on CPU):
  // a run on CUDA whose checkpoint holds no CUDA generator state must not look CPU-only.
  int64_t cuda_devices = 0;
  // Values written outside /extra, with the group that holds them (for the placeholders).
  std::map<const Value*, std::string> moved;
};

// The value of a one-element tensor (a step counter), or nullopt.
using ScalarRead = std::function<std::optional<double>(size_t tree, const TensorRecord&)>;

Routing route(const std::vector<SourceTree>& trees, const ScalarRead& scalar);

// "foo.pt:a.b" (or "a.b" when the tree has no label; the label alone for the root).
std::string source_path(const std::string& label, const std::string& path);

}  // namespace ckpt::verify::convert
