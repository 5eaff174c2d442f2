// Compares lr_at with the table tests/sched/gen_lr_table.py wrote from torch 1.13's schedulers
// (and transformers' warmup multipliers run through torch's LambdaLR).
#include <catch2/catch.hpp>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "ckpt/sched/scheduler.h"

namespace ckpt::sched::torch_table_test {
namespace {

ScheduleSpec spec_from_json(const nlohmann::json& j) {
  ScheduleSpec s;
  s.kind = *schedule_kind_from_name(j.at("kind").get<std::string>());
  s.base_lr = j.value("base_lr", s.base_lr);
  s.warmup_steps = j.value("warmup_steps", s.warmup_steps);
  s.total_steps = j.value("total_steps", s.total_steps);
  s.min_lr = j.value("min_lr", s.min_lr);
  s.power = j.value("power", s.power);
  s.step_size = j.value("step_size", s.step_size);
  s.gamma = j.value("gamma", s.gamma);
  s.milestones = j.value("milestones", s.milestones);
  s.max_lr = j.value("max_lr", s.max_lr);
  s.pct_start = j.value("pct_start", s.pct_start);
  s.div_factor = j.value("div_factor", s.div_factor);
  s.final_div_factor = j.value("final_div_factor", s.final_div_factor);
  return s;
}

TEST_CASE("Schedules match torch / transformers values within 1e-12 relative", "[sched]") {
  std::ifstream in(std::string(CKPT_SOURCE_DIR) + "/tests/sched/data/lr_table.json");
  REQUIRE(in.good());
  const auto table = nlohmann::json::parse(in);
  REQUIRE(table.at("cases").size() >= 20);
  std::set<ScheduleKind> kinds_seen;
  for (const auto& c : table.at("cases")) {
    const std::string name = c.at("name").get<std::string>();
    INFO(name);
    auto spec = validate(spec_from_json(c.at("spec")));
    REQUIRE(spec.is_ok());
    kinds_seen.insert(spec->kind);
    const auto& lrs = c.at("lrs");
    REQUIRE(lrs.size() > 1);
    Scheduler sched(*spec);
    for (size_t step = 0; step < lrs.size(); ++step) {
      INFO("step " << step);
      const double expected = lrs[step].get<double>();
      const double got = lr_at(*spec, static_cast<int64_t>(step));
      CHECK(lr_close(got, expected, 1e-12));
      if (step > 0) sched.step();
      CHECK(sched.lr() == got);
    }
  }
  CHECK(kinds_seen.size() == schedule_kinds().size());
}

}  // namespace
}  // namespace ckpt::sched::torch_table_test
