#include <sys/stat.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "analytics/input/json_text.h"
#include "ckpt/sched/schedule.h"
#include "cli/commands.h"
#include "tests/analytics/test_support.h"
#include "tests/common/test_readers.h"

namespace ckpt::analytics::report_test {
namespace {

using cli::ReportCommandOptions;
using cli::run_report_command;

using testing::ScratchDir;

// A run whose second process lost the scheduler and the loader: warmup again, epoch head again.
std::string journal_text() {
  sched::ScheduleSpec s;
  s.kind = sched::ScheduleKind::kWarmupCosine;
  s.base_lr = 1e-3;
  s.warmup_steps = 20;
  s.total_steps = 300;
  s = *sched::validate(s);
  std::string j;
  char buf[400];
  const char* start =
      "{\"event\":\"start\",\"time\":0,\"step\":%d,\"fresh\":%s,\"grad_accum\":1,\"sampler\":"
      "{\"dataset_size\":5000,\"seed\":2,\"shuffle\":true,\"drop_last\":false,\"world_size\":2,"
      "\"batch_size\":8,\"kind\":\"ckpt\"},\"scheduler\":{\"kind\":\"warmup_cosine\","
      "\"base_lr\":0.001,\"warmup_steps\":20,\"total_steps\":300}}\n";
  int origin = 0, position = 0;
  for (int step = 0; step < 150; ++step) {
    if (step == 0 || step == 80) {
      std::snprintf(buf, sizeof buf, start, step, step ? "false" : "true");
      j += buf;
      if (step == 80) {
        j += "{\"event\":\"restore\",\"time\":1,\"step\":80,\"checkpoint\":\"step-000000000080\","
             "\"restored\":[\"model\"],\"missing\":[\"scheduler\",\"loader\"],\"loader\":null}\n";
        origin = 80;
        position = 0;
      }
    }
    std::snprintf(buf, sizeof buf,
                  "{\"event\":\"progress\",\"time\":2,\"step\":%d,\"lr\":%.17g,\"loss\":1.0,"
                  "\"epoch\":0,\"position\":%d,\"samples\":16}\n",
                  step, sched::lr_at(s, step - origin), position);
    j += buf;
    position += 16;
  }
  return j;
}

size_t count_of(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + 1)) ++n;
  return n;
}

bool have_chromium() { return std::system("command -v chromium > /dev/null 2>&1") == 0; }

TEST_CASE("ckpt report: one self-contained page with both charts", "[analytics]") {
  ScratchDir dir;
  dir.file("journal.jsonl", journal_text());
  // The profiler's own fixture trace, when it is there, fills the profiler section.
  const std::string trace = std::string(CKPT_SOURCE_DIR) + "/fixtures/profile/starved_loader.json";
  auto trace_text = read_text_file(Env::posix(), trace);
  if (trace_text.is_ok()) {
    ::mkdir((dir.path() + "/profile").c_str(), 0755);
    dir.file("profile/trace_rank0.json", *trace_text);
  }
  std::ostringstream out, err;
  ReportCommandOptions o;
  o.run_dir = dir.path();
  o.html_path = dir.path() + "/report.html";
  const int rc = run_report_command(o, Env::posix(), test::foreign_readers(), out, err);
  CHECK(rc == 2);  // the LR fell back into warmup at step 80
  auto html = read_text_file(Env::posix(), o.html_path);
  REQUIRE(html.is_ok());
  CHECK(count_of(*html, "<section id=\"audit\">") == 1);
  CHECK(count_of(*html, "<section id=\"lr\">") == 1);
  CHECK(count_of(*html, "<section id=\"coverage\">") == 1);
  CHECK(count_of(*html, "class=\"lr-series\"") == 1);
  CHECK(count_of(*html, "class=\"epoch-strip\"") == 1);
  CHECK(html->find("restarted_warmup") != std::string::npos);
  if (trace_text.is_ok()) CHECK(count_of(*html, "<section id=\"profile\">") == 1);
  // Self-contained: nothing to fetch, nothing to run.
  CHECK(html->find("<script") == std::string::npos);
  CHECK(html->find("src=") == std::string::npos);
  CHECK(html->find("href=") == std::string::npos);
  CHECK(html->find("https://") == std::string::npos);

  if (!have_chromium()) {
    WARN("skipped the rendering check: chromium is not installed");
    return;
  }
  // A probe copy asks the renderer for the laid-out size of each chart's main layer: zero or
  // missing means the chart did not render.
  std::string probe = *html;
  const std::string script =
      "<script>const r={};for(const s of ['.lr-series','.epoch-strip','.discontinuity']){"
      "const e=document.querySelector(s);const b=e?e.getBBox():null;"
      "r[s]=b?[b.width,b.height]:null;}document.body.setAttribute('data-probe',"
      "JSON.stringify(r));</script>";
  probe.insert(probe.rfind("</body>"), script);
  const std::string probe_path = dir.file("probe.html", probe);
  const std::string dom_path = dir.path() + "/dom.html";
  const std::string cmd =
      "timeout 120 chromium --headless --no-sandbox --disable-gpu "
      "--virtual-time-budget=3000 --dump-dom 'file://" +
      probe_path + "' > '" + dom_path + "' 2> /dev/null";
  REQUIRE(std::system(cmd.c_str()) == 0);
  auto dom = read_text_file(Env::posix(), dom_path);
  REQUIRE(dom.is_ok());
  const size_t at = dom->find("data-probe=\"");
  REQUIRE(at != std::string::npos);
  std::string attr = dom->substr(at + 12, dom->find('"', at + 12) - at - 12);
  for (size_t p; (p = attr.find("&quot;")) != std::string::npos;) attr.replace(p, 6, "\"");
  const auto sizes = nlohmann::json::parse(attr);
  INFO(attr);
  for (const char* layer : {".lr-series", ".epoch-strip", ".discontinuity"}) {
    REQUIRE(sizes[layer].is_array());
    CHECK(sizes[layer][0].get<double>() > 5);
    CHECK(sizes[layer][1].get<double>() > 5);
  }
  CHECK(sizes[".lr-series"][0].get<double>() > 500);  // the series spans the plot
}

TEST_CASE("ckpt report: usage and missing run directory", "[analytics]") {
  std::ostringstream out, err;
  ReportCommandOptions o;
  o.run_dir = "/nonexistent/run";
  CHECK(run_report_command(o, Env::posix(), test::foreign_readers(), out, err) == 64);
  o.html_path = "/tmp/never-written.html";
  CHECK(run_report_command(o, Env::posix(), test::foreign_readers(), out, err) == 66);
}

}  // namespace
}  // namespace ckpt::analytics::report_test
