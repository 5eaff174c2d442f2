#include "analytics/lr/lr_analysis.h"

#include <algorithm>
#include <cmath>
#include <iterator>

namespace ckpt::analytics {
namespace {

// Slack on the hull test: a quarter of the larger neighbouring change absorbs the curvature of
// coarse logs (a cosine logged every tenth of its length changes slope by ~5% per gap), and a
// relative 1e-4 of the LR absorbs loggers that print 6 significant digits.
constexpr double kHullSlack = 0.25;
constexpr double kRelativeNoise = 1e-4;
// A change within 1% of the LR's level is never called a discontinuity: near the flat end of a
// decay the slope itself vanishes, so relative slope slack alone would flag rounding-size bends.
constexpr double kMinJump = 0.01;
// reset_to_base: the new LR within 2% of the base LR.
constexpr double kBaseMatch = 0.02;

// A restart in [from, upto]: inclusive at both ends because logs number a restart either by the
// checkpoint it resumed from (Hugging Face's checkpoint-400: the logged point at 400 is still the
// old process) or by the first step the new process took (our journal).
bool restart_in_gap(const std::vector<int64_t>& sorted, int64_t from, int64_t upto,
                    int64_t* found) {
  auto it = std::lower_bound(sorted.begin(), sorted.end(), from);
  if (it != sorted.end() && *it <= upto) {
    *found = *it;
    return true;
  }
  return false;
}

// A milestone in (after, upto]: the schedule's own jump lands on the milestone step.
bool any_in_gap(const std::vector<int64_t>& sorted, int64_t after, int64_t upto) {
  auto it = std::upper_bound(sorted.begin(), sorted.end(), after);
  return it != sorted.end() && *it <= upto;
}

bool close_rel(double a, double b, double tol) {
  const double scale = std::max(std::abs(a), std::abs(b));
  return std::abs(a - b) <= tol * scale || scale == 0;
}

// Whether the change over gap i is explained by the neighbouring gaps' slopes.
bool smooth_gap(const std::vector<LrPoint>& p, size_t i, double noise_floor) {
  const double ds = static_cast<double>(p[i + 1].step - p[i].step);
  const double j = p[i + 1].lr - p[i].lr;
  double lo = 0, hi = 0;
  bool have = false;
  auto add_prediction = [&](size_t k) {
    const double slope = (p[k + 1].lr - p[k].lr) / static_cast<double>(p[k + 1].step - p[k].step);
    const double pred = slope * ds;
    lo = have ? std::min(lo, pred) : pred;
    hi = have ? std::max(hi, pred) : pred;
    have = true;
  };
  if (i >= 1) add_prediction(i - 1);
  if (i + 2 < p.size()) add_prediction(i + 1);
  if (!have) return true;  // two points: nothing to compare with
  // Zero joins the hull: a change in the predicted direction but smaller than predicted is a
  // schedule slowing down (the quadratic approach to a cosine's floor, a one-cycle's start), and
  // a change that stops is a plateau — neither is a jump.
  lo = std::min(lo, 0.0);
  hi = std::max(hi, 0.0);
  const double tol = kHullSlack * std::max(std::abs(lo), std::abs(hi)) +
                     kMinJump * std::max(std::abs(p[i].lr), std::abs(p[i + 1].lr)) + noise_floor;
  return j >= lo - tol && j <= hi + tol;
}

// `running_max[k]`: the highest LR among points 0..k (the base LR when there is no schedule).
JumpKind classify(const std::vector<LrPoint>& p, size_t i, const LrSeries& s, double noise_floor,
                  const std::vector<double>& running_max) {
  const double before = p[i].lr, after = p[i + 1].lr;
  if (after < before) {
    if (i + 2 < p.size()) {
      const double next = p[i + 2].lr;
      if (next - after > kRelativeNoise * std::abs(after) + noise_floor) {
        return JumpKind::kRestartedWarmup;
      }
    } else if (s.schedule && s.schedule->warmup_steps > 0) {
      // The log ends right after the fall: it is a warmup restart if it landed on a warmup value.
      const double top = sched::lr_at(*s.schedule, s.schedule->warmup_steps - 1);
      if (after <= top * (1 + kRelativeNoise)) return JumpKind::kRestartedWarmup;
    }
    return JumpKind::kJumpDown;
  }
  double base = 0;
  if (s.schedule) {
    base = s.schedule->kind == sched::ScheduleKind::kOneCycle ? s.schedule->max_lr
                                                              : s.schedule->base_lr;
  } else {
    base = std::max(0.0, running_max[i]);
  }
  if (base > 0 && std::abs(after - base) <= kBaseMatch * base &&
      before < after * (1 - kBaseMatch)) {
    return JumpKind::kResetToBase;
  }
  return JumpKind::kJumpUp;
}

}  // namespace

const char* jump_kind_name(JumpKind k) {
  switch (k) {
    case JumpKind::kRestartedWarmup:
      return "restarted_warmup";
    case JumpKind::kResetToBase:
      return "reset_to_base";
    case JumpKind::kJumpUp:
      return "jump_up";
    case JumpKind::kJumpDown:
      return "jump_down";
  }
  return "jump";
}

bool LrAnalysis::has_findings() const {
  if (!discontinuities.empty()) return true;
  for (const auto& c : restart_checks) {
    if (c.mismatched > 0) return true;
  }
  return false;
}

LrAnalysis analyze_lr(const LrSeries& series, const LrOptions& options) {
  LrAnalysis out;
  const auto& p = series.points;
  out.points = static_cast<int64_t>(p.size());
  out.has_schedule = series.schedule.has_value();
  out.restarts = series.restarts;
  out.restarts.insert(out.restarts.end(), options.restarts.begin(), options.restarts.end());
  std::sort(out.restarts.begin(), out.restarts.end());
  out.restarts.erase(std::unique(out.restarts.begin(), out.restarts.end()), out.restarts.end());
  if (options.use_inferred_restarts) {
    for (int64_t r : series.inferred_restarts) {
      if (!std::binary_search(out.restarts.begin(), out.restarts.end(), r)) {
        out.inferred_restarts.push_back(r);
      }
    }
    std::sort(out.inferred_restarts.begin(), out.inferred_restarts.end());
    out.inferred_restarts.erase(
        std::unique(out.inferred_restarts.begin(), out.inferred_restarts.end()),
        out.inferred_restarts.end());
    std::vector<int64_t> all;
    std::merge(out.restarts.begin(), out.restarts.end(), out.inferred_restarts.begin(),
               out.inferred_restarts.end(), std::back_inserter(all));
    out.restarts = std::move(all);
  }
  if (p.empty()) return out;

  std::vector<int64_t> milestones = options.milestones;
  if (series.schedule) {
    const auto bp = sched::breakpoints(*series.schedule, p.back().step);
    milestones.insert(milestones.end(), bp.begin(), bp.end());
  }
  std::sort(milestones.begin(), milestones.end());

  double scale = 0;
  for (const auto& q : p) scale = std::max(scale, std::abs(q.lr));
  // One pass, so that a log that is discontinuous at every point stays linear.
  std::vector<double> running_max(p.size());
  for (size_t k = 0; k < p.size(); ++k) {
    running_max[k] = k == 0 ? p[0].lr : std::max(running_max[k - 1], p[k].lr);
  }
  const double noise_floor = 1e-9 * scale;

  for (size_t i = 0; i + 1 < p.size(); ++i) {
    if (smooth_gap(p, i, noise_floor)) continue;
    int64_t restart = 0;
    const bool at_restart = restart_in_gap(out.restarts, p[i].step, p[i + 1].step, &restart);
    std::optional<double> expected;
    if (series.schedule) {
      expected = sched::lr_at(*series.schedule, p[i + 1].step);
      const double expected_before = sched::lr_at(*series.schedule, p[i].step);
      // The spec itself jumps here (a step decay's boundary) and both ends agree with it.
      if (close_rel(p[i + 1].lr, *expected, options.expected_rel_tolerance) &&
          close_rel(p[i].lr, expected_before, options.expected_rel_tolerance)) {
        continue;
      }
    } else if (!at_restart && any_in_gap(milestones, p[i].step, p[i + 1].step)) {
      continue;
    }
    Discontinuity d;
    d.step = at_restart ? restart : p[i + 1].step;
    d.step_before = p[i].step;
    d.lr_before = p[i].lr;
    d.lr_after = p[i + 1].lr;
    d.expected = expected;
    d.at_restart = at_restart;
    d.restart_inferred = at_restart && std::binary_search(out.inferred_restarts.begin(),
                                                          out.inferred_restarts.end(), restart);
    d.kind = classify(p, i, series, noise_floor, running_max);
    out.discontinuities.push_back(d);
  }

  if (series.schedule) {
    for (size_t r = 0; r < out.restarts.size(); ++r) {
      RestartCheck c;
      c.restart_step = out.restarts[r];
      const int64_t end = r + 1 < out.restarts.size() ? out.restarts[r + 1] : INT64_MAX;
      double worst = -1;
      // Points are in step order: only this restart's segment is visited.
      auto first = std::lower_bound(p.begin(), p.end(), c.restart_step,
                                    [](const LrPoint& q, int64_t step) { return q.step < step; });
      for (auto it = first; it != p.end() && it->step < end; ++it) {
        const LrPoint& q = *it;
        const double want = sched::lr_at(*series.schedule, q.step);
        const double abs_err = std::abs(q.lr - want);
        const double rel_err = want != 0 ? abs_err / std::abs(want) : (abs_err == 0 ? 0 : INFINITY);
        ++c.points;
        if (!close_rel(q.lr, want, options.expected_rel_tolerance)) ++c.mismatched;
        c.max_abs_error = std::max(c.max_abs_error, abs_err);
        c.max_rel_error = std::max(c.max_rel_error, rel_err);
        if (abs_err > worst) {
          worst = abs_err;
          c.worst_step = q.step;
          c.worst_lr = q.lr;
          c.worst_expected = want;
        }
      }
      out.restart_checks.push_back(c);
    }
  }
  return out;
}

}  // namespace ckpt::analytics
