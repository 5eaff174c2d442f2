#include "ckpt/sched/schedule.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <string>

namespace ckpt::sched::schedule_test {
namespace {

constexpr double kPi = 3.14159265358979323846;

ScheduleSpec spec_of(const std::string& kind) {
  ScheduleSpec s;
  s.kind = *schedule_kind_from_name(kind);
  s.base_lr = 1.0;
  return s;
}

TEST_CASE("Schedules: warmup then cosine, by hand", "[sched]") {
  ScheduleSpec s = spec_of("warmup_cosine");
  s.warmup_steps = 4;
  s.total_steps = 12;
  s.min_lr = 0.1;
  REQUIRE(validate(s).is_ok());
  CHECK(lr_at(s, 0) == 0.0);
  CHECK(lr_at(s, 1) == Approx(0.25));
  CHECK(lr_at(s, 4) == Approx(1.0));
  CHECK(lr_at(s, 8) == Approx(0.1 + 0.9 * 0.5 * (1 + std::cos(kPi * 0.5))));
  CHECK(lr_at(s, 12) == Approx(0.1));
  CHECK(lr_at(s, 1000) == Approx(0.1));
  s.warmup_start_factor = 0.5;
  CHECK(lr_at(s, 0) == Approx(0.5));
  CHECK(lr_at(s, 2) == Approx(0.75));
}

TEST_CASE("Schedules: breakpoints", "[sched]") {
  ScheduleSpec s = spec_of("warmup_linear");
  s.warmup_steps = 10;
  s.total_steps = 100;
  CHECK(breakpoints(s, 1000) == std::vector<int64_t>{10, 100});
  CHECK(breakpoints(s, 50) == std::vector<int64_t>{10});
  s = spec_of("step");
  s.step_size = 30;
  CHECK(breakpoints(s, 100) == std::vector<int64_t>{30, 60, 90});
  s = spec_of("multistep");
  s.milestones = {0, 50, 20, 20};
  CHECK(breakpoints(*validate(s), 100) == std::vector<int64_t>{20, 50});
  s = spec_of("exponential");
  CHECK(breakpoints(s, 100).empty());
  s = spec_of("one_cycle");
  s.max_lr = 1;
  s.total_steps = 100;
  s.pct_start = 0.25;  // e1 = 24: step 24 is the peak, 25 the first step of phase 2
  CHECK(breakpoints(s, 1000) == std::vector<int64_t>{25, 100});
}

TEST_CASE("Schedules: validate rejects nonsense with a clear message", "[sched]") {
  auto msg = [](ScheduleSpec s) {
    auto r = validate(s);
    REQUIRE_FALSE(r.is_ok());
    return r.status().message();
  };
  auto cosine = schedule_kind_from_name("cosine");
  REQUIRE_FALSE(cosine.is_ok());
  CHECK(cosine.status().message().find("unknown kind \"cosine\"") != std::string::npos);
  ScheduleSpec s = spec_of("step");
  CHECK(msg(s) == "schedule \"step\": step_size must be > 0, got 0");
  s.step_size = -2;
  CHECK(msg(s) == "schedule \"step\": step_size must be >= 0, got -2");
  s = spec_of("warmup_cosine");
  s.total_steps = 10;
  s.warmup_steps = -1;
  CHECK(msg(s) == "schedule \"warmup_cosine\": warmup_steps must be >= 0, got -1");
  s.warmup_steps = 0;
  s.base_lr = std::nan("");
  CHECK(msg(s).find("base_lr must be finite") != std::string::npos);
  s = spec_of("exponential");
  s.warmup_steps = 3;
  CHECK(msg(s).find("has no warmup") != std::string::npos);
  s = spec_of("one_cycle");
  s.total_steps = 10;
  CHECK(msg(s).find("max_lr must be > 0") != std::string::npos);
  s.max_lr = 1;
  s.pct_start = 0.1;
  CHECK(msg(s).find("pct_start * total_steps must not be 1") != std::string::npos);
}

}  // namespace
}  // namespace ckpt::sched::schedule_test

namespace ckpt::sched::schedule_test {
namespace {

// Steps where lr changes at all (piecewise-constant kinds) or where the slope changes (piecewise
// linear kinds), found numerically, must be exactly the documented breakpoints.
std::vector<int64_t> jumps(const ScheduleSpec& s, int64_t up_to) {
  std::vector<int64_t> out;
  for (int64_t b = 1; b <= up_to; ++b) {
    if (lr_at(s, b) != lr_at(s, b - 1)) out.push_back(b);
  }
  return out;
}
std::vector<int64_t> kinks(const ScheduleSpec& s, int64_t up_to) {
  std::vector<int64_t> out;
  for (int64_t b = 1; b <= up_to; ++b) {
    const double before = lr_at(s, b) - lr_at(s, b - 1);
    const double after = lr_at(s, b + 1) - lr_at(s, b);
    if (std::fabs(after - before) > 1e-12) out.push_back(b);
  }
  return out;
}

TEST_CASE("Schedules: numerically found jumps and kinks are the breakpoints", "[sched]") {
  ScheduleSpec s = spec_of("step");
  s.step_size = 9;
  s.gamma = 0.7;
  CHECK(jumps(s, 100) == breakpoints(s, 100));
  s = *validate([] {
    ScheduleSpec m = spec_of("multistep");
    m.milestones = {40, 3, 17, 17};
    return m;
  }());
  CHECK(jumps(s, 100) == breakpoints(s, 100));
  s = spec_of("warmup_linear");
  s.warmup_steps = 8;
  s.total_steps = 50;
  s.min_lr = 0.25;
  CHECK(kinks(s, 100) == breakpoints(s, 100));
  s = spec_of("constant");
  s.warmup_steps = 6;
  s.warmup_start_factor = 0.2;
  CHECK(kinks(s, 100) == breakpoints(s, 100));
}

TEST_CASE("Schedules: continuity where no breakpoint is declared", "[sched]") {
  // Smooth kinds: consecutive steps differ by a small fraction of the LR away from breakpoints.
  ScheduleSpec cos = spec_of("warmup_cosine");
  cos.warmup_steps = 100;
  cos.total_steps = 1000;
  ScheduleSpec oc = spec_of("one_cycle");
  oc.max_lr = 1.0;
  oc.total_steps = 1000;
  oc = *validate(oc);
  ScheduleSpec isq = spec_of("inverse_sqrt");
  isq.warmup_steps = 100;
  for (const ScheduleSpec& s : {cos, oc, isq}) {
    INFO(schedule_kind_name(s.kind));
    for (int64_t b = 1; b < 1100; ++b) {
      CHECK(std::fabs(lr_at(s, b) - lr_at(s, b - 1)) <= 0.011 * s.max_lr + 0.011 * s.base_lr);
    }
  }
  // The warmup ends exactly on base_lr, and one_cycle peaks at max_lr at floor(e1).
  CHECK(lr_at(cos, 100) == 1.0);
  CHECK(lr_at(isq, 100) == 1.0);
  CHECK(lr_at(oc, 299) == Approx(1.0).epsilon(1e-15));
}

TEST_CASE("Schedules: edge steps", "[sched]") {
  ScheduleSpec s = spec_of("exponential");
  s.gamma = 0.5;
  CHECK(lr_at(s, -5) == lr_at(s, 0));
  CHECK(lr_at(s, 1 << 20) == 0.0);  // underflows to zero, never NaN
  s = spec_of("step");
  s.step_size = int64_t{1} << 62;
  CHECK(breakpoints(s, INT64_MAX) == std::vector<int64_t>{int64_t{1} << 62});
  s = spec_of("one_cycle");
  s.max_lr = 2.0;
  s.total_steps = 20;
  s = *validate(s);
  CHECK(s.base_lr == 2.0 / 25);
  CHECK(lr_at(s, 0) == Approx(2.0 / 25));
  CHECK(lr_at(s, 19) == Approx(2.0 / 25 / 1e4));
  CHECK(lr_at(s, 1000) == lr_at(s, 20));  // torch raises past total_steps; we hold
  s = spec_of("warmup_poly");
  s.warmup_steps = 5;
  s.total_steps = 5;  // no decay phase at all
  s.min_lr = 0.5;
  CHECK(lr_at(s, 5) == 0.5);
  ScheduleSpec unknown = spec_of("constant");
  unknown.kind = static_cast<ScheduleKind>(99);
  CHECK(std::isnan(lr_at(unknown, 3)));
  CHECK(std::isnan(lr_at(spec_of("step"), 3)));  // step_size 0: not validated, no trap
}

}  // namespace
}  // namespace ckpt::sched::schedule_test
