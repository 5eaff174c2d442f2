// LR across restarts: finds the steps where a learning-rate series jumps instead of following a
// smooth schedule, classifies each jump, and — when the schedule spec is known (our run journal
// records it) — compares every post-restart LR with the closed form (ckpt/sched/schedule.h).
//
// Detection. For each gap between consecutive points, the change J is compared with what the two
// neighbouring gaps predict for it (their slope times the gap's width). A smooth schedule — even
// one whose slope changes, as at the end of warmup or at the peak of a one-cycle — keeps J inside
// the hull of those two predictions and zero; a jump lands far outside (slack: a quarter of the
// larger prediction plus 1% of the LR). A declared milestone (a step
// decay's milestone from the spec's breakpoints or --milestones) inside the gap explains a jump,
// and with a known spec a jump whose both ends equal the spec's values is the spec's own.
// Classes: restarted_warmup (falls, then ramps again — or lands on a warmup value of the spec),
// reset_to_base (rises back to the base LR), jump_up, jump_down.
//
// Pure functions of their inputs; thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "analytics/lr/lr_input.h"

namespace ckpt::analytics {

enum class JumpKind { kRestartedWarmup, kResetToBase, kJumpUp, kJumpDown };
const char* jump_kind_name(JumpKind k);

struct Discontinuity {
  int64_t step = 0;         // first step on the new level (a known restart step inside the gap)
  int64_t step_before = 0;  // the last point before the jump
  double lr_before = 0;
  double lr_after = 0;
  std::optional<double> expected;  // lr_at(spec, step) when the spec is known
  JumpKind kind = JumpKind::kJumpDown;
  bool at_restart = false;        // a known restart lies inside the gap
  bool restart_inferred = false;  // ... and it is only inferred from a wall-time gap
};

// How the points from one restart up to the next compare with the spec's closed form.
struct RestartCheck {
  int64_t restart_step = 0;
  int64_t points = 0;
  int64_t mismatched = 0;  // points whose relative error exceeds the tolerance
  double max_abs_error = 0;
  double max_rel_error = 0;
  int64_t worst_step = 0;  // where |error| is largest
  double worst_lr = 0;
  double worst_expected = 0;
};

struct LrOptions {
  std::vector<int64_t> restarts;         // extra known restart steps (--restarts)
  std::vector<int64_t> milestones;       // declared step-decay milestones (--milestones)
  double expected_rel_tolerance = 1e-6;  // logged LRs may be float32
  // Use the series' wall-time-gap restarts (LrSeries::inferred_restarts). `ckpt lr` turns this
  // off when --restarts names the restarts.
  bool use_inferred_restarts = true;
};

struct LrAnalysis {
  int64_t points = 0;
  std::vector<int64_t> restarts;  // series' restarts ∪ options' ∪ inferred ones, ascending
  std::vector<int64_t> inferred_restarts;  // those of `restarts` only inferred, ascending
  std::vector<Discontinuity> discontinuities;
  std::vector<RestartCheck> restart_checks;  // one per restart, only when the spec is known
  bool has_schedule = false;

  // Discontinuities, or post-restart LRs that disagree with the spec.
  bool has_findings() const;
};

LrAnalysis analyze_lr(const LrSeries& series, const LrOptions& options);

}  // namespace ckpt::analytics
