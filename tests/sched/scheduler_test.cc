#include "ckpt/sched/scheduler.h"

#include <catch2/catch.hpp>
#include <string>

namespace ckpt::sched::scheduler_test {
namespace {

ScheduleSpec cosine() {
  ScheduleSpec s;
  s.kind = ScheduleKind::kWarmupCosine;
  s.base_lr = 3e-4;
  s.warmup_steps = 10;
  s.total_steps = 100;
  s.min_lr = 3e-5;
  return s;
}

std::vector<ScheduleSpec> one_of_each() {
  std::vector<ScheduleSpec> out;
  for (const auto& kind : schedule_kinds()) {
    ScheduleSpec s;
    s.kind = kind;
    s.base_lr = 0.1;
    s.total_steps = 50;
    s.min_lr = 0.001;
    s.step_size = 7;
    s.gamma = 0.5;
    s.milestones = {30, 10, 20, 20};
    s.max_lr = 0.4;
    s.power = 2.0;
    s.warmup_start_factor = 0.1;
    const std::string name = schedule_kind_name(kind);
    const bool warm = name == "constant" || name.rfind("warmup_", 0) == 0 || name == "inverse_sqrt";
    s.warmup_steps = warm ? 5 : 0;
    out.push_back(s);
  }
  return out;
}

TEST_CASE("Scheduler: stateful stepping equals the closed form at every step", "[sched]") {
  for (const auto& spec : one_of_each()) {
    INFO(schedule_kind_name(spec.kind));
    Scheduler sched(spec);
    REQUIRE(sched.last_step() == 0);
    REQUIRE(sched.lr() == lr_at(sched.spec(), 0));
    for (int64_t step = 1; step <= 120; ++step) {
      const double lr = sched.step();
      REQUIRE(sched.last_step() == step);
      REQUIRE(lr == sched.lr());
      REQUIRE(lr == lr_at(sched.spec(), step));
    }
  }
}

TEST_CASE("Scheduler: node round trip for every kind, mid-schedule", "[sched]") {
  for (const auto& spec : one_of_each()) {
    INFO(schedule_kind_name(spec.kind));
    Scheduler sched(spec);
    for (int i = 0; i < 23; ++i) sched.step();
    Node node;
    sched.to_node(&node);
    REQUIRE(node.get_string("kind") == schedule_kind_name(spec.kind));
    REQUIRE(node.get_int("last_step") == 23);
    REQUIRE(node.get_double("last_lr") == sched.lr());
    auto back = Scheduler::from_node(node);
    REQUIRE(back.is_ok());
    REQUIRE(back->spec() == sched.spec());
    REQUIRE(back->last_step() == 23);
    REQUIRE(back->lr() == sched.lr());
    // The restored scheduler continues exactly like the original.
    for (int i = 0; i < 40; ++i) REQUIRE(back->step() == sched.step());
  }
}

TEST_CASE("Scheduler: from_node names what is missing, ill-typed or inconsistent", "[sched]") {
  Scheduler sched(cosine());
  for (int i = 0; i < 12; ++i) sched.step();
  Node good;
  sched.to_node(&good);

  Node no_kind = good;
  no_kind.attrs.erase("kind");
  auto r = Scheduler::from_node(no_kind);
  REQUIRE_FALSE(r.is_ok());
  REQUIRE(r.status().message() == "scheduler: attribute \"kind\" is missing");

  Node bad_kind = good;
  bad_kind.attrs["kind"] = std::string("cosine_with_restarts");
  r = Scheduler::from_node(bad_kind);
  REQUIRE_FALSE(r.is_ok());
  REQUIRE(r.status().message().find("unknown kind \"cosine_with_restarts\"") != std::string::npos);

  Node typed = good;
  typed.attrs["warmup_steps"] = 10.0;
  r = Scheduler::from_node(typed);
  REQUIRE_FALSE(r.is_ok());
  REQUIRE(r.status().message() ==
          "scheduler: attribute \"warmup_steps\" is a double, expected an int64");

  Node no_step = good;
  no_step.attrs.erase("last_step");
  r = Scheduler::from_node(no_step);
  REQUIRE_FALSE(r.is_ok());
  REQUIRE(r.status().message() == "scheduler: attribute \"last_step\" is missing");

  Node negative = good;
  negative.attrs["last_step"] = int64_t{-3};
  REQUIRE_FALSE(Scheduler::from_node(negative).is_ok());

  Node lied = good;
  lied.attrs["last_lr"] = 3e-4;  // the base LR, as if the schedule had restarted
  r = Scheduler::from_node(lied);
  REQUIRE_FALSE(r.is_ok());
  REQUIRE(r.status().code() == Code::kCorrupt);
  REQUIRE(r.status().message().find("disagrees") != std::string::npos);

  Node invalid = good;
  invalid.attrs["total_steps"] = int64_t{5};  // less than warmup
  r = Scheduler::from_node(invalid);
  REQUIRE_FALSE(r.is_ok());
  REQUIRE(r.status().message().find("less than warmup_steps") != std::string::npos);

  // An int where a double is expected is accepted (h5py writes 1 for 1.0 sometimes).
  Node int_lr = good;
  int_lr.attrs["min_lr"] = int64_t{0};
  auto ok = spec_from_node(int_lr);
  REQUIRE(ok.is_ok());
  REQUIRE(ok->min_lr == 0.0);
}

TEST_CASE("Scheduler: create and the constructor refuse invalid specs", "[sched]") {
  ScheduleSpec s = cosine();
  s.kind = static_cast<ScheduleKind>(99);  // a value outside the enum
  REQUIRE_FALSE(Scheduler::create(s).is_ok());
  auto nope = schedule_kind_from_name("nope");
  REQUIRE(nope.status().code() == Code::kInvalidArgument);
  REQUIRE(nope.status().message().find("expected one of constant, warmup_cosine") !=
          std::string::npos);
  REQUIRE_THROWS_AS(Scheduler(s), std::invalid_argument);
  REQUIRE_FALSE(Scheduler::create(cosine(), -1).is_ok());
  auto at = Scheduler::create(cosine(), 40);
  REQUIRE(at.is_ok());
  REQUIRE(at->lr() == lr_at(cosine(), 40));
}

}  // namespace
}  // namespace ckpt::sched::scheduler_test
