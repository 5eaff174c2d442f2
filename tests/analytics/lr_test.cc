#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdio>
#include <sstream>

#include "analytics/lr/lr_analysis.h"
#include "analytics/lr/lr_input.h"
#include "analytics/render/lr_report.h"
#include "ckpt/sched/schedule.h"
#include "cli/commands.h"
#include "tests/analytics/test_support.h"

namespace ckpt::analytics::lr_test {
namespace {

using cli::LrCommandOptions;
using cli::run_lr_command;

using testing::fixture;
using testing::ScratchDir;

sched::ScheduleSpec spec_of(const std::string& kind) {
  sched::ScheduleSpec s;
  s.kind = *sched::schedule_kind_from_name(kind);
  s.base_lr = 1e-3;
  const std::string k = kind;
  s.warmup_steps =
      k == "step" || k == "multistep" || k == "exponential" || k == "one_cycle" ? 0 : 50;
  s.total_steps = 1000;
  s.min_lr = 1e-5;
  s.power = 2.0;
  s.step_size = 200;
  s.gamma = kind == "exponential" ? 0.995 : 0.5;
  s.milestones = {300, 600};
  s.max_lr = 1e-3;
  auto v = sched::validate(s);
  REQUIRE(v.is_ok());
  return *v;
}

LrSeries series_from(const sched::ScheduleSpec& s, int64_t every, std::vector<int64_t> restarts) {
  LrSeries out;
  out.source = "generated";
  int64_t origin = 0;
  for (int64_t step = 0; step < 1000; ++step) {
    for (int64_t r : restarts) {
      if (step == r) origin = r;  // the scheduler starts over: back into warmup
    }
    if (step % every == 0) out.points.push_back({step, sched::lr_at(s, step - origin)});
  }
  return out;
}

TEST_CASE("every schedule kind is continuous: no discontinuity", "[analytics]") {
  for (sched::ScheduleKind k : sched::schedule_kinds()) {
    const std::string kind = sched::schedule_kind_name(k);
    for (int64_t every : {1, 10}) {
      CAPTURE(kind, every);
      const auto spec = spec_of(kind);
      LrSeries logs = series_from(spec, every, {});
      LrOptions declared;
      declared.milestones = sched::breakpoints(spec, 1000);
      // Logs with the step-decay milestones declared, and the same run with the spec known.
      CHECK(analyze_lr(logs, declared).discontinuities.empty());
      LrSeries ours = logs;
      ours.schedule = spec;
      const auto a = analyze_lr(ours, {});
      CHECK(a.discontinuities.empty());
      CHECK_FALSE(a.has_findings());
    }
  }
}

TEST_CASE("undeclared step decays are jumps down", "[analytics]") {
  const auto spec = spec_of("multistep");
  const auto a = analyze_lr(series_from(spec, 1, {}), {});
  REQUIRE(a.discontinuities.size() == 2);
  CHECK(a.discontinuities[0].step == 300);
  CHECK(a.discontinuities[1].step == 600);
  CHECK(a.discontinuities[0].kind == JumpKind::kJumpDown);
}

TEST_CASE("a log restarting into warmup at two points: exactly two, restarted_warmup",
          "[analytics]") {
  for (const auto& kind : {"warmup_cosine", "warmup_linear", "inverse_sqrt", "constant"}) {
    CAPTURE(kind);
    const auto spec = spec_of(kind);
    const auto a = analyze_lr(series_from(spec, 1, {300, 650}), {});
    REQUIRE(a.discontinuities.size() == 2);
    CHECK(a.discontinuities[0].step == 300);
    CHECK(a.discontinuities[1].step == 650);
    for (const auto& d : a.discontinuities) {
      CHECK(d.kind == JumpKind::kRestartedWarmup);
      CHECK_FALSE(d.at_restart);
      CHECK_FALSE(d.expected.has_value());
    }
  }
}

TEST_CASE("coarse logs: a known restart inside the gap names the step", "[analytics]") {
  const auto spec = spec_of("warmup_cosine");
  const LrSeries logs = series_from(spec, 10, {305, 655});
  auto blind = analyze_lr(logs, {});
  REQUIRE(blind.discontinuities.size() == 2);
  CHECK(blind.discontinuities[0].step == 310);
  LrOptions known;
  known.restarts = {305, 655};
  auto told = analyze_lr(logs, known);
  REQUIRE(told.discontinuities.size() == 2);
  CHECK(told.discontinuities[0].step == 305);
  CHECK(told.discontinuities[1].step == 655);
  CHECK(told.discontinuities[0].at_restart);
}

TEST_CASE("with the spec known, post-restart LRs are compared with the schedule", "[analytics]") {
  const auto spec = spec_of("warmup_cosine");
  LrSeries ours = series_from(spec, 1, {400});
  ours.schedule = spec;
  ours.restarts = {400};
  const auto a = analyze_lr(ours, {});
  REQUIRE(a.discontinuities.size() == 1);
  const auto& d = a.discontinuities[0];
  CHECK(d.step == 400);
  CHECK(d.kind == JumpKind::kRestartedWarmup);
  REQUIRE(d.expected.has_value());
  CHECK(*d.expected == Approx(sched::lr_at(spec, 400)));
  REQUIRE(a.restart_checks.size() == 1);
  CHECK(a.restart_checks[0].points == 600);
  CHECK(a.restart_checks[0].mismatched == 600);
  CHECK(a.restart_checks[0].worst_expected > a.restart_checks[0].worst_lr);

  // A correct resume: nothing off the schedule.
  LrSeries good = series_from(spec, 1, {});
  good.schedule = spec;
  good.restarts = {400};
  const auto ok = analyze_lr(good, {});
  CHECK(ok.discontinuities.empty());
  REQUIRE(ok.restart_checks.size() == 1);
  CHECK(ok.restart_checks[0].mismatched == 0);
}

TEST_CASE("the text report counts restarts and names their steps as steps", "[analytics]") {
  const auto spec = spec_of("warmup_cosine");
  LrSeries one = series_from(spec, 1, {31});
  one.schedule = spec;
  one.restarts = {31};
  std::ostringstream text;
  print_lr_text(one, analyze_lr(one, {}), text);
  CHECK(text.str().find("restarts: 1, at step 31\n") != std::string::npos);
  CHECK(text.str().find("  restart at step 31: ") != std::string::npos);

  LrSeries two = series_from(spec, 1, {300, 650});
  two.restarts = {300, 650};
  std::ostringstream text2;
  print_lr_text(two, analyze_lr(two, {}), text2);
  CHECK(text2.str().find("restarts: 2, at steps 300, 650\n") != std::string::npos);

  LrSeries none = series_from(spec, 1, {});
  std::ostringstream text3;
  print_lr_text(none, analyze_lr(none, {}), text3);
  CHECK(text3.str().find("restarts: none known\n") != std::string::npos);
}

TEST_CASE("reset_to_base, jump_up and jump_down are told apart", "[analytics]") {
  auto cosine = spec_of("warmup_cosine");
  cosine.warmup_steps = 0;
  cosine = *sched::validate(cosine);
  // The scheduler restarted without warmup: back to the base LR, then decaying again.
  auto a = analyze_lr(series_from(cosine, 1, {500}), {});
  REQUIRE(a.discontinuities.size() == 1);
  CHECK(a.discontinuities[0].kind == JumpKind::kResetToBase);

  LrSeries manual;
  manual.source = "manual";
  for (int64_t s = 0; s < 300; ++s) {
    const double lr = s < 100 ? 1e-3 : s < 200 ? 4e-4 : 6e-4;
    manual.points.push_back({s, lr});
  }
  a = analyze_lr(manual, {});
  REQUIRE(a.discontinuities.size() == 2);
  CHECK(a.discontinuities[0].kind == JumpKind::kJumpDown);
  CHECK(a.discontinuities[1].kind == JumpKind::kJumpUp);
  CHECK(a.discontinuities[1].step == 200);
}

TEST_CASE("CSV written by torch LambdaLR restarting into warmup", "[analytics]") {
  auto s = load_lr_series(Env::posix(), fixture("lr_restart_warmup.csv"), "auto");
  REQUIRE(s.is_ok());
  CHECK(s->format == "csv");
  CHECK(s->points.size() == 1000);
  const auto a = analyze_lr(*s, {});
  // lr_restart_warmup.expected.json: restarts at 300 and 650.
  REQUIRE(a.discontinuities.size() == 2);
  CHECK(a.discontinuities[0].step == 300);
  CHECK(a.discontinuities[1].step == 650);
  CHECK(a.discontinuities[0].kind == JumpKind::kRestartedWarmup);
  CHECK(a.discontinuities[1].kind == JumpKind::kRestartedWarmup);
}

// Both files were written by transformers 4.30.2's Trainer
// (fixtures/analytics/make_hf_fixtures.py).
TEST_CASE("Hugging Face trainer_state.json: continuous and restarted", "[analytics]") {
  auto cont = load_lr_series(Env::posix(), fixture("trainer_state_continuous.json"), "auto");
  REQUIRE(cont.is_ok());
  CHECK(cont->format == "trainer_state");
  CHECK(cont->points.size() == 60);  // training logs only; eval and summary entries skipped
  CHECK(analyze_lr(*cont, {}).discontinuities.empty());

  auto restarted = load_lr_series(Env::posix(), fixture("trainer_state_restarted.json"), "auto");
  REQUIRE(restarted.is_ok());
  const auto a = analyze_lr(*restarted, {});
  REQUIRE(a.discontinuities.size() == 1);
  CHECK(a.discontinuities[0].step == 410);
  CHECK(a.discontinuities[0].kind == JumpKind::kRestartedWarmup);
  // Told where the restart was (trainer_state_restarted.expected.json: 400), it names that step.
  LrOptions told;
  told.restarts = {400};
  const auto b = analyze_lr(*restarted, told);
  REQUIRE(b.discontinuities.size() == 1);
  CHECK(b.discontinuities[0].step == 400);
  CHECK(b.discontinuities[0].at_restart);
}

TEST_CASE("JSONL logs and repeated steps: the last occurrence wins", "[analytics]") {
  const std::string text =
      "{\"step\": 0, \"lr\": 0.1}\n{\"step\": 1, \"learning_rate\": 0.1}\n"
      "{\"step\": 2, \"lr\": 0.5}\n{\"eval_loss\": 3}\n{\"step\": 2, \"lr\": 0.1, \"loss\": NaN}\n";
  auto s = lr_from_jsonl_text(text, "log.jsonl");
  REQUIRE(s.is_ok());
  REQUIRE(s->points.size() == 3);
  CHECK(s->points[2].lr == 0.1);
}

TEST_CASE("bad LR inputs: one line naming the file, exit 65 / 66", "[analytics]") {
  ScratchDir dir;
  std::ostringstream out, err;
  LrCommandOptions o;
  o.input = dir.file("nolr.csv", "step,loss\n0,1.0\n");
  CHECK(run_lr_command(o, Env::posix(), out, err) == 65);
  CHECK(err.str().find("nolr.csv:1:") != std::string::npos);
  CHECK(err.str().find("learning_rate") != std::string::npos);

  err.str("");
  o.input = dir.file("badnum.csv", "step,lr\n0,0.1\n1,abc\n");
  CHECK(run_lr_command(o, Env::posix(), out, err) == 65);
  CHECK(err.str().find("badnum.csv:3:") != std::string::npos);

  err.str("");
  o.input = dir.file("ragged.csv", "step,lr,loss\n0,0.1\n");
  CHECK(run_lr_command(o, Env::posix(), out, err) == 65);

  err.str("");
  o.input = dir.file("broken.json", "{\"log_history\": [ {\"step\": 1, ");
  CHECK(run_lr_command(o, Env::posix(), out, err) == 65);
  CHECK(err.str().find("broken.json") != std::string::npos);
  const std::string message = err.str();
  CHECK(std::count(message.begin(), message.end(), '\n') == 1);

  err.str("");
  o.input = dir.path() + "/absent.csv";
  CHECK(run_lr_command(o, Env::posix(), out, err) == 66);

  err.str("");
  o.input = dir.file("ok.csv", "step,lr\n0,0.1\n1,0.1\n");
  o.format = "yaml";
  CHECK(run_lr_command(o, Env::posix(), out, err) == 64);
}

TEST_CASE("our run journal: restarts, crash redo, schedule checks, JSON and exit 2",
          "[analytics]") {
  ScratchDir dir;
  const auto spec = spec_of("warmup_linear");
  std::string j =
      "{\"event\":\"start\",\"time\":1,\"step\":0,\"fresh\":true,\"grad_accum\":1,"
      "\"sampler\":{\"dataset_size\":1000,\"seed\":1,\"shuffle\":true,\"drop_last\":false,"
      "\"world_size\":1,\"batch_size\":10,\"kind\":\"ckpt\"},\"scheduler\":{\"kind\":"
      "\"warmup_linear\",\"base_lr\":0.001,\"warmup_steps\":50,\"total_steps\":1000,"
      "\"min_lr\":1e-05,\"future_key\":[1,2]}}\n";
  auto progress = [&](int64_t step, double lr) {
    char buf[200];
    std::snprintf(buf, sizeof buf,
                  "{\"event\":\"progress\",\"time\":2,\"step\":%lld,\"lr\":%.17g,"
                  "\"loss\":1,\"epoch\":0,\"position\":%lld}\n",
                  static_cast<long long>(step), lr, static_cast<long long>(step % 100) * 10);
    j += buf;
  };
  for (int64_t s = 0; s < 130; ++s) progress(s, sched::lr_at(spec, s));
  // Crash after step 129; the checkpoint at 100 lacks the scheduler: warmup again.
  j += "{\"event\":\"start\",\"time\":3,\"step\":100,\"fresh\":false}\n"
       "{\"event\":\"restore\",\"time\":3,\"step\":100,\"checkpoint\":\"step-000000000100\","
       "\"restored\":[\"model\"],\"missing\":[\"scheduler\",\"loader\"],\"loader\":null}\n";
  for (int64_t s = 100; s < 200; ++s) progress(s, sched::lr_at(spec, s - 100));
  j += "{\"event\":\"progress\",\"step\":";  // torn last line
  dir.file("journal.jsonl", j);

  auto series = lr_from_run(Env::posix(), dir.path());
  REQUIRE(series.is_ok());
  CHECK(series->warnings.size() == 1);
  REQUIRE(series->schedule.has_value());
  CHECK(series->restarts == std::vector<int64_t>{100});
  CHECK(series->points.size() == 200);
  CHECK(series->points[100].lr == Approx(sched::lr_at(spec, 0)).margin(1e-12));

  std::ostringstream out, err;
  LrCommandOptions o;
  o.input = dir.path();
  o.json = true;
  o.svg_path = dir.path() + "/lr.svg";
  CHECK(run_lr_command(o, Env::posix(), out, err) == 2);
  const std::string js = out.str();
  CHECK(js.find("\"restarted_warmup\"") != std::string::npos);
  CHECK(js.find("\"expected\"") != std::string::npos);
  CHECK(js.find("\"restarts\": [\n    100\n  ]") != std::string::npos);
}

}  // namespace
}  // namespace ckpt::analytics::lr_test
