#include "ckpt/sched/schedule.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>

namespace ckpt::sched {
namespace {

constexpr double kPi = 3.14159265358979323846;

std::string num(double v) {
  std::ostringstream os;
  os.precision(17);
  os << v;
  return os.str();
}

using K = ScheduleKind;

bool is_warmup_kind(K k) {
  return k == K::kConstant || k == K::kWarmupCosine || k == K::kWarmupLinear ||
         k == K::kWarmupPoly || k == K::kInverseSqrt;
}
bool is_decay_kind(K k) {
  return k == K::kWarmupCosine || k == K::kWarmupLinear || k == K::kWarmupPoly;
}

// Linear warmup; only called for s < W.
double warmup_lr(const ScheduleSpec& s, int64_t step) {
  const double f = s.warmup_start_factor;
  return s.base_lr *
         (f + (1.0 - f) * static_cast<double>(step) / static_cast<double>(s.warmup_steps));
}

double cos_anneal(double start, double end, double pct) {
  return end + (start - end) / 2.0 * (std::cos(kPi * pct) + 1.0);
}

// torch.optim.lr_scheduler.OneCycleLR.get_lr, two phases, cosine. The phase-1 end is a double
// (pct_start * T - 1) exactly as torch computes it, so fractional phase ends match too.
double one_cycle_lr(const ScheduleSpec& s, int64_t step) {
  const double initial = s.max_lr / s.div_factor;
  const double final_lr = initial / s.final_div_factor;
  const double t = static_cast<double>(std::min(step, s.total_steps));
  const double e1 = s.pct_start * static_cast<double>(s.total_steps) - 1.0;
  const double e2 = static_cast<double>(s.total_steps) - 1.0;
  if (t <= e1) return cos_anneal(initial, s.max_lr, t / e1);
  return cos_anneal(s.max_lr, final_lr, (t - e1) / (e2 - e1));
}

Status bad(const ScheduleSpec& s, const std::string& what) {
  return invalid_argument("schedule \"" + std::string(schedule_kind_name(s.kind)) + "\": " + what);
}

}  // namespace

bool ScheduleSpec::operator==(const ScheduleSpec& o) const {
  return kind == o.kind && base_lr == o.base_lr && warmup_steps == o.warmup_steps &&
         total_steps == o.total_steps && min_lr == o.min_lr && power == o.power &&
         step_size == o.step_size && gamma == o.gamma && milestones == o.milestones &&
         max_lr == o.max_lr && pct_start == o.pct_start && div_factor == o.div_factor &&
         final_div_factor == o.final_div_factor && warmup_start_factor == o.warmup_start_factor;
}

const char* schedule_kind_name(ScheduleKind k) {
  switch (k) {
    case K::kConstant:
      return "constant";
    case K::kWarmupCosine:
      return "warmup_cosine";
    case K::kWarmupLinear:
      return "warmup_linear";
    case K::kWarmupPoly:
      return "warmup_poly";
    case K::kStep:
      return "step";
    case K::kMultistep:
      return "multistep";
    case K::kExponential:
      return "exponential";
    case K::kInverseSqrt:
      return "inverse_sqrt";
    case K::kOneCycle:
      return "one_cycle";
  }
  return "?";
}

const std::vector<ScheduleKind>& schedule_kinds() {
  static const std::vector<ScheduleKind> kinds = {
      K::kConstant,  K::kWarmupCosine, K::kWarmupLinear, K::kWarmupPoly, K::kStep,
      K::kMultistep, K::kExponential,  K::kInverseSqrt,  K::kOneCycle};
  return kinds;
}

Result<ScheduleKind> schedule_kind_from_name(const std::string& name) {
  std::string list;
  for (ScheduleKind k : schedule_kinds()) {
    if (name == schedule_kind_name(k)) return k;
    list += (list.empty() ? "" : ", ") + std::string(schedule_kind_name(k));
  }
  return invalid_argument("schedule: unknown kind \"" + name + "\" (expected one of " + list + ")");
}

Result<ScheduleSpec> validate(ScheduleSpec s) {
  const auto& kinds = schedule_kinds();
  if (std::find(kinds.begin(), kinds.end(), s.kind) == kinds.end()) {
    return invalid_argument("schedule: unknown kind " + std::to_string(static_cast<int>(s.kind)));
  }
  const std::pair<const char*, double> doubles[] = {{"base_lr", s.base_lr},
                                                    {"min_lr", s.min_lr},
                                                    {"power", s.power},
                                                    {"gamma", s.gamma},
                                                    {"max_lr", s.max_lr},
                                                    {"pct_start", s.pct_start},
                                                    {"div_factor", s.div_factor},
                                                    {"final_div_factor", s.final_div_factor},
                                                    {"warmup_start_factor", s.warmup_start_factor}};
  for (const auto& [name, v] : doubles) {
    if (!std::isfinite(v)) return bad(s, std::string(name) + " must be finite, got " + num(v));
  }
  const std::pair<const char*, int64_t> ints[] = {
      {"warmup_steps", s.warmup_steps}, {"total_steps", s.total_steps}, {"step_size", s.step_size}};
  for (const auto& [name, v] : ints) {
    if (v < 0) return bad(s, std::string(name) + " must be >= 0, got " + std::to_string(v));
  }
  if (s.base_lr < 0) return bad(s, "base_lr must be >= 0, got " + num(s.base_lr));
  if (s.warmup_start_factor < 0 || s.warmup_start_factor > 1) {
    return bad(s, "warmup_start_factor must be in [0, 1], got " + num(s.warmup_start_factor));
  }
  if (!is_warmup_kind(s.kind) && s.warmup_steps != 0) {
    return bad(s, "has no warmup, but warmup_steps = " + std::to_string(s.warmup_steps));
  }
  if (is_decay_kind(s.kind)) {
    if (s.total_steps < 1)
      return bad(s, "total_steps must be >= 1, got " + std::to_string(s.total_steps));
    if (s.total_steps < s.warmup_steps) {
      return bad(s, "total_steps " + std::to_string(s.total_steps) + " is less than warmup_steps " +
                        std::to_string(s.warmup_steps));
    }
    if (s.min_lr < 0 || s.min_lr > s.base_lr) {
      return bad(s,
                 "min_lr must be in [0, base_lr = " + num(s.base_lr) + "], got " + num(s.min_lr));
    }
  }
  if (s.kind == K::kWarmupPoly && s.power <= 0) {
    return bad(s, "power must be > 0, got " + num(s.power));
  }
  if (s.kind == K::kStep || s.kind == K::kMultistep || s.kind == K::kExponential) {
    if (s.gamma <= 0) return bad(s, "gamma must be > 0, got " + num(s.gamma));
  }
  if (s.kind == K::kStep && s.step_size < 1) {
    return bad(s, "step_size must be > 0, got " + std::to_string(s.step_size));
  }
  if (s.kind == K::kMultistep) {
    for (int64_t m : s.milestones) {
      if (m < 0) return bad(s, "milestones must be >= 0, got " + std::to_string(m));
    }
    std::sort(s.milestones.begin(), s.milestones.end());
  }
  if (s.kind == K::kOneCycle) {
    if (s.total_steps < 1)
      return bad(s, "total_steps must be >= 1, got " + std::to_string(s.total_steps));
    if (s.max_lr <= 0) return bad(s, "max_lr must be > 0, got " + num(s.max_lr));
    if (s.div_factor <= 0) return bad(s, "div_factor must be > 0, got " + num(s.div_factor));
    if (s.final_div_factor <= 0) {
      return bad(s, "final_div_factor must be > 0, got " + num(s.final_div_factor));
    }
    if (s.pct_start < 0 || s.pct_start >= 1) {
      return bad(s, "pct_start must be in [0, 1), got " + num(s.pct_start));
    }
    // torch divides by the phase-1 end; at pct_start * T == 1 that end is 0 (ZeroDivisionError).
    if (s.pct_start * static_cast<double>(s.total_steps) - 1.0 == 0.0) {
      return bad(s,
                 "pct_start * total_steps must not be 1 (phase 1 would end at step 0; torch "
                 "divides by zero there), got pct_start " +
                     num(s.pct_start) + " and total_steps " + std::to_string(s.total_steps));
    }
    s.base_lr = s.max_lr / s.div_factor;
  }
  return s;
}

double lr_at(const ScheduleSpec& s, int64_t step) {
  if (step < 0) step = 0;
  if (is_warmup_kind(s.kind) && step < s.warmup_steps) return warmup_lr(s, step);
  const double W = static_cast<double>(s.warmup_steps);
  const double T = static_cast<double>(s.total_steps);
  const double x = static_cast<double>(step);
  if (s.kind == K::kConstant) return s.base_lr;
  if (s.kind == K::kWarmupCosine) {
    const double p = std::min(1.0, (x - W) / std::max(1.0, T - W));
    return s.min_lr + (s.base_lr - s.min_lr) * 0.5 * (1.0 + std::cos(kPi * p));
  }
  if (s.kind == K::kWarmupLinear) {
    return s.min_lr + (s.base_lr - s.min_lr) * std::max(0.0, (T - x) / std::max(1.0, T - W));
  }
  if (s.kind == K::kWarmupPoly) {
    if (step > s.total_steps || s.total_steps == s.warmup_steps) return s.min_lr;
    const double remaining = 1.0 - (x - W) / (T - W);
    return (s.base_lr - s.min_lr) * std::pow(remaining, s.power) + s.min_lr;
  }
  if (s.kind == K::kStep) {
    // An unvalidated step_size of 0 must not become an integer division by zero.
    if (s.step_size <= 0) return std::numeric_limits<double>::quiet_NaN();
    const int64_t boundaries_passed = step / s.step_size;  // floor: both are non-negative
    return s.base_lr * std::pow(s.gamma, static_cast<double>(boundaries_passed));
  }
  if (s.kind == K::kMultistep) {
    const auto passed =
        std::upper_bound(s.milestones.begin(), s.milestones.end(), step) - s.milestones.begin();
    return s.base_lr * std::pow(s.gamma, static_cast<double>(passed));
  }
  if (s.kind == K::kExponential) return s.base_lr * std::pow(s.gamma, x);
  if (s.kind == K::kInverseSqrt) return s.base_lr * std::sqrt(std::max(1.0, W) / std::max(1.0, x));
  if (s.kind == K::kOneCycle) return one_cycle_lr(s, step);
  return std::numeric_limits<double>::quiet_NaN();
}

std::vector<int64_t> breakpoints(const ScheduleSpec& s, int64_t up_to_step) {
  std::vector<int64_t> out;
  auto add = [&](int64_t b) {
    if (b >= 1 && b <= up_to_step) out.push_back(b);
  };
  if (is_warmup_kind(s.kind) && s.warmup_steps > 0) add(s.warmup_steps);
  if (is_decay_kind(s.kind)) add(s.total_steps);
  if (s.kind == K::kStep && s.step_size > 0) {
    // Stop before b + step_size could overflow near INT64_MAX.
    for (int64_t b = s.step_size; b <= up_to_step; b += s.step_size) {
      add(b);
      if (b > up_to_step - s.step_size) break;
    }
  }
  if (s.kind == K::kMultistep) {
    for (int64_t m : s.milestones) add(m);
  }
  if (s.kind == K::kOneCycle && s.total_steps > 0) {
    const double e1 = s.pct_start * static_cast<double>(s.total_steps) - 1.0;
    if (e1 >= 0) add(static_cast<int64_t>(std::floor(e1)) + 1);
    add(s.total_steps);
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

}  // namespace ckpt::sched
