// libtorch's own LR scheduler, torch::optim::StepLR, made resumable. StepLR keeps its position in
// a protected member (LRScheduler::step_count_) and its step_size/gamma private, with no accessor
// in 1.13 or 2.x, so a plain StepLR cannot be captured. ResumableStepLR is a StepLR (drop-in: the
// same constructor and step()) that exposes and sets them. The learning rates themselves live in
// the optimizer's param groups and are restored with the optimizer (optimizer_state.h), which is
// exactly what StepLR::step() reads next — so optimizer + step count resume it exactly.
//
// Layout of /scheduler for it (the on-disk schema):
//   attrs   type "torch.StepLR", step_size (int64), gamma (double),
//           step_count (int64: step() calls so far), last_lr (vector<double>: the groups' lr)
//
// Ownership: the scheduler references its optimizer, which must outlive it (as in libtorch).
// Not thread-safe.
#pragma once

#include <torch/optim/schedulers/step_lr.h>

#include <cstdint>

#include "ckpt/base/status.h"
#include "ckpt/format/tree.h"

namespace ckpt::torch_adapter {

class ResumableStepLR : public torch::optim::StepLR {
 public:
  ResumableStepLR(torch::optim::Optimizer& optimizer, unsigned step_size, double gamma = 0.1);

  unsigned step_size() const { return step_size_copy_; }
  double gamma() const { return gamma_copy_; }
  // Number of step() calls since construction (libtorch's step_count_).
  int64_t step_count() const { return step_count_; }
  void set_step_count(unsigned n) { step_count_ = n; }
  const torch::optim::Optimizer& optimizer() const { return optimizer_ref_; }

 private:
  // StepLR's own copies are private; these are the same values, kept for capture.
  unsigned step_size_copy_;
  double gamma_copy_;
  torch::optim::Optimizer& optimizer_ref_;
};

// Fills `out` (normally root.child("scheduler")).
Status capture_step_lr(const ResumableStepLR& s, Node* out);

// Checks type, step_size and gamma against `s` (kMismatch, expected vs actual) and sets its step
// count. Restore the optimizer too: the current LRs come from its param groups.
Status restore_step_lr(const Node& in, ResumableStepLR& s);

}  // namespace ckpt::torch_adapter
