// Scheduler: a stateful LR scheduler over a closed-form ScheduleSpec (schedule.h), the part of the
// training state that the `scheduler` component of a checkpoint records. Like torch's LRScheduler
// it holds last_step (torch's last_epoch) and the LR for that step; step() advances by one. Since
// the LR is always lr_at(spec, last_step), restoring needs only the spec and last_step, and a
// verifier can check the recorded last_lr against the closed form.
//
// Node attributes (all on the scheduler node): kind (string); base_lr, min_lr, power, gamma,
// max_lr, pct_start, div_factor, final_div_factor, warmup_start_factor (double); warmup_steps,
// total_steps, step_size (int64); milestones (int64 array); last_step (int64); last_lr (double).
//
// A Scheduler is a small value; not thread-safe to step concurrently.
#pragma once

#include <cstdint>

#include "ckpt/base/status.h"
#include "ckpt/format/tree.h"
#include "ckpt/sched/schedule.h"

namespace ckpt::sched {

class Scheduler {
 public:
  // Starts at last_step 0. Throws std::invalid_argument when validate(s) fails; use create() for
  // specs from files or users.
  explicit Scheduler(ScheduleSpec s);
  static Result<Scheduler> create(ScheduleSpec s, int64_t last_step = 0);

  double lr() const { return last_lr_; }
  int64_t last_step() const { return last_step_; }
  const ScheduleSpec& spec() const { return spec_; }
  // Advances to last_step + 1 and returns the LR for it.
  double step();
  // Jumps to `step` (>= 0; throws std::invalid_argument otherwise), e.g. to seed a scheduler with
  // the global step on resume.
  void set_last_step(int64_t step);

  // Writes the attributes above into `scheduler_node` (overwriting those names).
  void to_node(Node* scheduler_node) const;
  // On success a scheduler at the node's last_step. On failure: a missing or ill-typed attribute,
  // an invalid spec, last_step < 0, or a last_lr that disagrees with the closed form at last_step
  // (relative difference > 1e-9: the checkpoint contradicts itself) — each named in the message.
  static Result<Scheduler> from_node(const Node& n);

 private:
  Scheduler(ScheduleSpec validated, int64_t last_step, bool);

  ScheduleSpec spec_;
  int64_t last_step_ = 0;
  double last_lr_ = 0;
};

// The spec alone, validated: `kind` is required; other spec fields default to ScheduleSpec's
// values when absent, must have the right type when present (ints are accepted for doubles).
Result<ScheduleSpec> spec_from_node(const Node& n);

// Relative tolerance used to compare a recorded LR with the closed form.
inline constexpr double kLrRelativeTolerance = 1e-9;
// |a - b| <= tol * max(|a|, |b|), or both zero.
bool lr_close(double a, double b, double tol = kLrRelativeTolerance);

}  // namespace ckpt::sched
