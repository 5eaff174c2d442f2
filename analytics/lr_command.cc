// `ckpt lr`: load the series, analyse it, print text or JSON, optionally write the SVG.
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

#include "analytics/commands.h"
#include "analytics/lr_analysis.h"
#include "analytics/lr_chart.h"
#include "analytics/lr_input.h"
#include "analytics/svg_canvas.h"
#include "cli/exit_codes.h"

namespace ckpt::analytics {
namespace {

nlohmann::json to_json(const LrSeries& s, const LrAnalysis& a) {
  nlohmann::json j;
  j["source"] = s.source;
  j["format"] = s.format;
  j["points"] = a.points;
  j["restarts"] = a.restarts;
  j["schedule_known"] = a.has_schedule;
  auto& ds = j["discontinuities"] = nlohmann::json::array();
  for (const auto& d : a.discontinuities) {
    nlohmann::json e = {
        {"step", d.step},         {"step_before", d.step_before},   {"lr_before", d.lr_before},
        {"lr_after", d.lr_after}, {"kind", jump_kind_name(d.kind)}, {"at_restart", d.at_restart}};
    if (d.expected) e["expected"] = *d.expected;
    ds.push_back(e);
  }
  auto& rc = j["restart_checks"] = nlohmann::json::array();
  for (const auto& c : a.restart_checks) {
    rc.push_back({{"restart_step", c.restart_step},
                  {"points", c.points},
                  {"mismatched", c.mismatched},
                  {"max_abs_error", c.max_abs_error},
                  {"max_rel_error", c.max_rel_error},
                  {"worst_step", c.worst_step},
                  {"worst_lr", c.worst_lr},
                  {"worst_expected", c.worst_expected}});
  }
  return j;
}

void print_text(const LrSeries& s, const LrAnalysis& a, std::ostream& out) {
  out << "ckpt lr: " << s.source << " (" << s.format << "), " << a.points << " points, steps "
      << s.points.front().step << ".." << s.points.back().step << "\n";
  out << "restarts: ";
  if (a.restarts.empty()) out << "none known";
  for (size_t i = 0; i < a.restarts.size(); ++i) out << (i ? ", " : "") << a.restarts[i];
  out << "\nschedule: "
      << (s.schedule ? s.schedule->kind + " (recorded by the run), base_lr " +
                           short_number(s.schedule->base_lr)
                     : std::string("unknown (logs carry no spec)"))
      << "\n";
  out << "discontinuities: " << a.discontinuities.size() << "\n";
  for (const auto& d : a.discontinuities) {
    out << "  step " << d.step << ": " << short_number(d.lr_before) << " -> "
        << short_number(d.lr_after) << "  " << jump_kind_name(d.kind);
    if (d.expected) out << "  (expected " << short_number(*d.expected) << ")";
    if (d.at_restart) out << "  at a restart";
    out << "\n";
  }
  if (!a.restart_checks.empty()) out << "after each restart, against the schedule:\n";
  for (const auto& c : a.restart_checks) {
    out << "  restart " << c.restart_step << ": " << c.points << " points, " << c.mismatched
        << " off the schedule";
    if (c.mismatched > 0) {
      out << "; worst at step " << c.worst_step << ": lr " << short_number(c.worst_lr)
          << ", expected " << short_number(c.worst_expected) << " (relative error "
          << short_number(c.max_rel_error) << ")";
    }
    out << "\n";
  }
  if (!a.has_findings()) out << "verdict: the LR is continuous across every restart\n";
}

}  // namespace

int exit_code_for_status(const Status& s) {
  switch (s.code()) {
    case Code::kOk:
      return cli::kExitOk;
    case Code::kNotFound:
    case Code::kIoError:
      return cli::kExitNoInput;
    case Code::kCorrupt:
    case Code::kUnsupported:
      return cli::kExitDataErr;
    case Code::kInvalidArgument:
      return cli::kExitUsage;
    case Code::kMismatch:
      return cli::kExitFindings;
    case Code::kInternal:
      return cli::kExitInternal;
  }
  return cli::kExitInternal;
}

Status write_text_file(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f) return io_error(path + ": cannot open for writing");
  f << text;
  f.close();
  if (!f) return io_error(path + ": write failed");
  return Status::ok();
}

int run_lr_command(const LrCommandOptions& o, std::ostream& out, std::ostream& err) {
  auto series = load_lr_series(o.input, o.format);
  if (!series.is_ok()) {
    err << "ckpt lr: " << series.status().message() << "\n";
    return exit_code_for_status(series.status());
  }
  for (const auto& w : series->warnings) err << "ckpt lr: warning: " << w << "\n";
  LrOptions opts;
  opts.restarts = o.restarts;
  opts.milestones = o.milestones;
  const LrAnalysis a = analyze_lr(*series, opts);
  if (!o.svg_path.empty()) {
    Status st = write_text_file(o.svg_path, lr_chart_svg(*series, a));
    if (!st.is_ok()) {
      err << "ckpt lr: " << st.message() << "\n";
      return exit_code_for_status(st);
    }
  }
  if (o.json) {
    out << to_json(*series, a).dump(2) << "\n";
  } else {
    print_text(*series, a, out);
  }
  return a.has_findings() ? cli::kExitFindings : cli::kExitOk;
}

}  // namespace ckpt::analytics
