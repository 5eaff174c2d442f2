// In-place restore targets: which live tensor each checkpoint tensor's bytes go into, decided from
// the tree's dtypes and shapes before any byte is read, so the restore pipeline (resume/) can read
// straight into the model's parameters and the optimizer's state (no intermediate copy).
//
// model_targets() runs every check restore_model() makes except the byte count and returns the
// module's own tensors. prepare_optimizer() runs every check restore_optimizer() makes and picks
// a target per state tensor: the optimizer's existing state tensor when it already has the
// parameter's dtype, shape and device and is contiguous, else a fresh tensor on the parameter's
// device; commit() then sets hyperparameters and state and cannot fail. Neither touches the live
// objects: a caller that fills the targets makes that all or nothing itself (restore_latest
// checks every hash first, resume::RestoreOptions::check_first).
// Not thread-safe with respect to the module and optimizer.
#pragma once

#include <ATen/core/Tensor.h>

#include <memory>
#include <string>
#include <vector>

#include "ckpt/base/status.h"
#include "ckpt/format/tree.h"
#include "ckpt/torch/fwd.h"

namespace ckpt::torch_adapter {

struct TensorTarget {
  std::string path;  // in the rank file: "/model/fc1.weight", "/optimizer/state/fc1.weight/exp_avg"
  at::Tensor tensor;   // where the bytes go
  bool fresh = false;  // allocated for this restore (nothing to undo)
};

// `in` is the /model node (tensors may be without bytes). Aliases get no target: their bytes are
// their target's.
Result<std::vector<TensorTarget>> model_targets(const Node& in, torch::nn::Module& m);

class PreparedOptimizer {
 public:
  PreparedOptimizer();
  ~PreparedOptimizer();
  PreparedOptimizer(PreparedOptimizer&&) noexcept;
  PreparedOptimizer& operator=(PreparedOptimizer&&) noexcept;

  const std::vector<TensorTarget>& targets() const;
  // Call once, after every target holds its bytes.
  void commit(torch::optim::Optimizer& opt);

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
  friend Result<PreparedOptimizer> prepare_optimizer(const Node&, torch::optim::Optimizer&,
                                                     const torch::nn::Module&);
};

// `in` is the /optimizer node (tensors may be without bytes).
Result<PreparedOptimizer> prepare_optimizer(const Node& in, torch::optim::Optimizer& opt,
                                            const torch::nn::Module& m);

}  // namespace ckpt::torch_adapter
