// Closed-form learning-rate schedules: a ScheduleSpec names a schedule and its parameters, and
// lr_at(spec, step) is the LR in effect for optimizer step `step` (step 0 is the first step, the
// value a torch scheduler reports right after construction; torch's `last_epoch` is our step).
// Being pure functions of (spec, step), they let the verifier and `ckpt lr` compute the expected
// LR at any step offline. Pure, stateless, thread-safe.
//
// Formulas (W = warmup_steps, T = total_steps, f = warmup_start_factor, s = step):
//   warmup (constant, warmup_*, inverse_sqrt when W > 0), for s < W:
//       lr = base_lr * (f + (1 - f) * s / W)
//     f = 0 is transformers' linear warmup from 0 (s / max(1, W)); lr reaches base_lr at s = W.
//   constant:       base_lr after warmup.
//   warmup_cosine:  transformers get_cosine_schedule_with_warmup (num_cycles = 0.5) with a floor:
//       p = min(1, (s - W) / max(1, T - W)); lr = min_lr + (base_lr - min_lr) * 0.5 (1 + cos(pi p))
//     so lr = min_lr from s = T on (transformers would rise again past T; we hold).
//   warmup_linear:  lr = min_lr + (base_lr - min_lr) * max(0, (T - s) / max(1, T - W)).
//   warmup_poly:    transformers get_polynomial_decay_schedule_with_warmup, lr_end = min_lr:
//       s > T: min_lr;  else (base_lr - min_lr) * (1 - (s - W) / (T - W))^power + min_lr.
//   step:           torch StepLR: base_lr * gamma^floor(s / step_size).
//   multistep:      torch MultiStepLR: base_lr * gamma^(number of milestones <= s), a repeated
//                   milestone counting once per repetition (torch's Counter).
//   exponential:    torch ExponentialLR: base_lr * gamma^s.
//   inverse_sqrt:   fairseq inverse_sqrt after warmup: base_lr * sqrt(max(1, W) / max(1, s)).
//   one_cycle:      torch OneCycleLR(anneal_strategy='cos', three_phase=False) with
//                   initial = max_lr / div_factor, final = initial / final_div_factor:
//       phase 1 ends at e1 = pct_start * T - 1, phase 2 at e2 = T - 1;
//       s <= e1: cos-anneal(initial -> max_lr, s / e1)
//       else:    cos-anneal(max_lr -> final, (s - e1) / (e2 - e1)),
//       cos-anneal(a -> b, p) = b + (a - b) / 2 * (cos(pi p) + 1). torch raises past s = T; we
//       evaluate s > T as s = T. base_lr is normalised to `initial` by validate().
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ckpt/base/status.h"

namespace ckpt::sched {

// The closed set of schedules; their names ("constant", "warmup_cosine", "warmup_linear",
// "warmup_poly", "step", "multistep", "exponential", "inverse_sqrt", "one_cycle") are what files
// and journals store.
enum class ScheduleKind {
  kConstant,
  kWarmupCosine,
  kWarmupLinear,
  kWarmupPoly,
  kStep,
  kMultistep,
  kExponential,
  kInverseSqrt,
  kOneCycle
};
const char* schedule_kind_name(ScheduleKind k);  // "?" for a value outside the enum
// invalid_argument naming the accepted names when `name` is none of them.
Result<ScheduleKind> schedule_kind_from_name(const std::string& name);

struct ScheduleSpec {
  ScheduleKind kind = ScheduleKind::kConstant;
  double base_lr = 0;
  int64_t warmup_steps = 0;
  int64_t total_steps = 0;
  double min_lr = 0;
  double power = 1.0;               // warmup_poly
  int64_t step_size = 0;            // step
  double gamma = 0.1;               // step, multistep, exponential
  std::vector<int64_t> milestones;  // multistep; validate() sorts them
  double max_lr = 0;                // one_cycle
  double pct_start = 0.3;           // one_cycle
  double div_factor = 25;           // one_cycle
  double final_div_factor = 1e4;    // one_cycle
  double warmup_start_factor = 0;   // LR at warmup step 0 = base_lr * factor

  bool operator==(const ScheduleSpec& o) const;
  bool operator!=(const ScheduleSpec& o) const { return !(*this == o); }
};

// Every kind, in the order above.
const std::vector<ScheduleKind>& schedule_kinds();

// On success the spec, normalised (milestones sorted; one_cycle's base_lr set to
// max_lr / div_factor). On failure invalid_argument naming the kind, the field, the rule and
// the value, e.g. `schedule "step": step_size must be > 0, got 0`.
Result<ScheduleSpec> validate(ScheduleSpec spec);

// The closed-form LR at `step` (negative steps evaluate as 0). The spec should have passed
// validate(); an unknown kind (or a step_size <= 0 for "step") yields NaN, never a trap.
double lr_at(const ScheduleSpec& s, int64_t step);

// Steps b in [1, up_to_step] at which the schedule legitimately jumps (lr(b) vs lr(b-1)) or
// changes slope (around b): end of warmup (W), end of decay (T, where warmup_* and one_cycle
// turn flat), every StepLR boundary (k * step_size), every distinct positive multistep milestone,
// and one_cycle's first phase-2 step (floor(e1) + 1). Sorted, without duplicates.
std::vector<int64_t> breakpoints(const ScheduleSpec& s, int64_t up_to_step);

}  // namespace ckpt::sched
