#include <catch2/catch.hpp>

#include <cmath>
#include <string>

#include "ckpt/sched/schedule.h"

namespace ckpt::sched {
namespace {

constexpr double kPi = 3.14159265358979323846;

ScheduleSpec spec_of(const std::string& kind) {
  ScheduleSpec s;
  s.kind = kind;
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
  CHECK(msg(spec_of("cosine")).find("unknown kind \"cosine\"") != std::string::npos);
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
}  // namespace ckpt::sched
