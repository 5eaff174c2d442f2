#include "analytics/lr_report.h"

#include "analytics/svg_canvas.h"

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

void print_lr_text(const LrSeries& s, const LrAnalysis& a, std::ostream& out) {
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

}  // namespace ckpt::analytics
