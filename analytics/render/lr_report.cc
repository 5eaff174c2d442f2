#include "analytics/render/lr_report.h"

#include <algorithm>

#include "analytics/input/json_text.h"
#include "analytics/render/svg_canvas.h"
#include "ckpt/base/text.h"

namespace ckpt::analytics {

nlohmann::json lr_to_json(const LrSeries& s, const LrAnalysis& a) {
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
    if (d.restart_inferred) e["restart_inferred"] = true;
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
  j["tag"] = s.tag;
  j["inferred_restarts"] = a.inferred_restarts;
  auto& rd = j["redone_steps"] = nlohmann::json::array();
  for (const auto& r : s.redone) {
    rd.push_back(
        {{"launch", r.launch}, {"first", r.first}, {"last", r.last}, {"points", r.points}});
  }
  auto& ls = j["launches"] = nlohmann::json::array();
  for (const auto& l : s.launches) {
    ls.push_back({{"source", l.source},
                  {"first_step", l.first_step},
                  {"last_step", l.last_step},
                  {"start_wall_time", l.start_wall_time}});
  }
  return j;
}

nlohmann::json lr_log_to_json(const std::vector<LrSeries>& series,
                              const std::vector<LrAnalysis>& analyses) {
  nlohmann::json j = lr_to_json(series.front(), analyses.front());
  j["warnings"] = series.front().warnings;
  auto& all = j["series"] = nlohmann::json::array();
  for (size_t i = 0; i < series.size(); ++i) {
    nlohmann::json one = lr_to_json(series[i], analyses[i]);
    one.erase("source");
    one.erase("format");
    all.push_back(std::move(one));
  }
  return j;
}

void print_lr_text(const LrSeries& s, const LrAnalysis& a, std::ostream& out) {
  out << "ckpt lr: " << s.source << " (" << s.format << ")";
  if (!s.tag.empty() && s.format != "run") out << ", series \"" << escape_bytes(s.tag, 200) << "\"";
  out << ", " << a.points << " points, steps " << s.points.front().step << ".."
      << s.points.back().step << "\n";
  if (s.launches.size() > 1) out << "launches: " << s.launches.size() << "\n";
  // "restarts: N, at step(s) S1, S2": the count first, so that a step is never read as one.
  out << "restarts: ";
  if (a.restarts.empty()) out << "none known";
  if (!a.restarts.empty())
    out << a.restarts.size() << (a.restarts.size() == 1 ? ", at step " : ", at steps ");
  for (size_t i = 0; i < a.restarts.size(); ++i) {
    const bool inferred =
        std::binary_search(a.inferred_restarts.begin(), a.inferred_restarts.end(), a.restarts[i]);
    out << (i ? ", " : "") << a.restarts[i] << (inferred ? " (inferred from a wall-time gap)" : "");
  }
  for (const auto& r : s.redone) {
    out << "\nredone: launch " << r.launch << " resumed at step " << r.first
        << ", before the last step logged by the earlier launches (" << r.last << "): " << r.points
        << " earlier points replaced";
  }
  out << "\nschedule: "
      << (s.schedule ? sched::schedule_kind_name(s.schedule->kind) +
                           std::string(" (recorded by the run), base_lr ") +
                           short_number(s.schedule->base_lr)
                     : std::string("unknown (logs carry no spec)"))
      << "\n";
  out << "discontinuities: " << a.discontinuities.size() << "\n";
  for (const auto& d : a.discontinuities) {
    out << "  step " << d.step << ": " << short_number(d.lr_before) << " -> "
        << short_number(d.lr_after) << "  " << jump_kind_name(d.kind);
    if (d.expected) out << "  (expected " << short_number(*d.expected) << ")";
    if (d.at_restart) out << (d.restart_inferred ? "  at an inferred restart" : "  at a restart");
    out << "\n";
  }
  if (!a.restart_checks.empty()) out << "after each restart, against the schedule:\n";
  for (const auto& c : a.restart_checks) {
    out << "  restart at step " << c.restart_step << ": " << c.points << " points, " << c.mismatched
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

void print_lr_log_text(const std::vector<LrSeries>& series, const std::vector<LrAnalysis>& analyses,
                       std::ostream& out) {
  if (series.size() > 1) {
    out << "series: " << series.size() << " (";
    for (size_t i = 0; i < series.size(); ++i)
      out << (i ? ", " : "") << escape_bytes(series[i].tag, 200);
    out << ")\n";
  }
  for (size_t i = 0; i < series.size(); ++i) {
    if (i) out << "\n";
    print_lr_text(series[i], analyses[i], out);
  }
}

}  // namespace ckpt::analytics
