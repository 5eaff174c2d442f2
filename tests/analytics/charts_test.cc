#include <catch2/catch.hpp>
#include <cctype>

#include "analytics/coverage/coverage.h"
#include "analytics/coverage/run_spec.h"
#include "analytics/lr/lr_analysis.h"
#include "analytics/render/coverage_chart.h"
#include "analytics/render/lr_chart.h"
#include "ckpt/sched/schedule.h"

namespace ckpt::analytics::charts_test {
namespace {

size_t count_of(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + 1)) ++n;
  return n;
}

// Every opened element is closed (or self-closed) in order: enough to catch broken markup. A
// plain scan, not std::regex: libstdc++'s regex recurses once per character matched, and a long
// `points="…"` attribute overflowed the stack under ASan.
bool balanced(const std::string& svg) {
  std::vector<std::string> stack;
  for (size_t open = svg.find('<'); open != std::string::npos; open = svg.find('<', open + 1)) {
    size_t at = open + 1;
    const bool closing = at < svg.size() && svg[at] == '/';
    if (closing) ++at;
    size_t name_end = at;
    while (name_end < svg.size() && std::isalpha(static_cast<unsigned char>(svg[name_end]))) {
      ++name_end;
    }
    if (name_end == at) continue;  // "<?xml", "<!--": not an element
    const size_t close = svg.find('>', name_end);
    if (close == std::string::npos) return false;
    const std::string name = svg.substr(at, name_end - at);
    if (svg[close - 1] == '/') continue;
    if (closing) {
      if (stack.empty() || stack.back() != name) return false;
      stack.pop_back();
    } else {
      stack.push_back(name);
    }
  }
  return stack.empty();
}

TEST_CASE("LR chart: series, restarts, discontinuities and axis titles", "[analytics]") {
  sched::ScheduleSpec s;
  s.kind = sched::ScheduleKind::kWarmupCosine;
  s.base_lr = 1e-3;
  s.warmup_steps = 20;
  s.total_steps = 500;
  s = *sched::validate(s);
  LrSeries series;
  series.source = "run <A&B>";
  for (int64_t step = 0; step < 500; ++step) {
    series.points.push_back({step, sched::lr_at(s, step < 200 ? step : step - 200)});
  }
  series.restarts = {200, 350};
  series.schedule = s;
  const auto a = analyze_lr(series, {});
  const std::string svg = lr_chart_svg(series, a);
  CHECK(balanced(svg));
  CHECK(count_of(svg, "class=\"lr-series\"") == 1);
  CHECK(count_of(svg, "class=\"expected\"") == 1);
  CHECK(count_of(svg, "class=\"restart\"") == 2);
  CHECK(count_of(svg, "class=\"discontinuity\"") == a.discontinuities.size());
  CHECK(a.discontinuities.size() == 1);
  CHECK(svg.find(">step</text>") != std::string::npos);
  CHECK(svg.find(">learning rate</text>") != std::string::npos);
  CHECK(svg.find("run &lt;A&amp;B&gt;") != std::string::npos);
}

TEST_CASE("coverage chart: one strip per epoch, never-visited and restart marks", "[analytics]") {
  RunSpec spec;
  spec.sampler.dataset_size = 1000;
  spec.sampler.batch_size = 10;
  spec.sampler.kind = SamplerKind::kCkpt;
  spec.segments = {{0, 150, false}, {150, 180, false}, {180, 200, false}};
  auto in = replay_run(spec);
  REQUIRE(in.is_ok());
  auto report = compute_coverage(*in, {});
  REQUIRE(report.is_ok());
  REQUIRE(report->epochs.size() == 2);
  const std::string svg = coverage_chart_svg(*report, "spec.json");
  CHECK(balanced(svg));
  CHECK(count_of(svg, "class=\"epoch-strip\"") == 2);
  CHECK(count_of(svg, "class=\"restart-mark\"") == 2);
  CHECK(count_of(svg, "class=\"never-visited\"") >= 1);
  CHECK(count_of(svg, "class=\"visited\"") >= 2);
}

TEST_CASE("coverage chart of a long run: the first and last epochs, every epoch in the table",
          "[analytics]") {
  RunSpec spec;
  spec.sampler.dataset_size = 100;
  spec.sampler.batch_size = 10;
  spec.sampler.kind = SamplerKind::kCkpt;
  spec.segments = {{0, 1000, false}};  // 100 epochs
  auto in = replay_run(spec);
  REQUIRE(in.is_ok());
  auto report = compute_coverage(*in, {});
  REQUIRE(report.is_ok());
  REQUIRE(report->epochs.size() == 100);
  CHECK(report->epochs[19].strip.size() == 100);
  CHECK(report->epochs[50].strip.empty());
  CHECK(report->epochs[80].strip.size() == 100);
  const std::string svg = coverage_chart_svg(*report, "long.json");
  CHECK(count_of(svg, "class=\"epoch-strip\"") == 40);
  CHECK(svg.find("data-epoch=\"99\"") != std::string::npos);
  CHECK(svg.find("data-epoch=\"50\"") == std::string::npos);
}

}  // namespace
}  // namespace ckpt::analytics::charts_test
