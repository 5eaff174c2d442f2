// The audit as HTML for `ckpt report`: a table (component, status badge, evidence, consequence,
// fix) and the findings list. Self-contained: the badge colours are inline, so the fragment reads
// the same in any page; every text from the checkpoint is escaped.
#include <string>

#include "ckpt/base/text.h"
#include "verify/audit/audit.h"

namespace ckpt::verify {
namespace {

// ok (green) for fine statuses, bad (red) for a required component that is not, warn (amber)
// for one outside --require.
const char* badge_class(const ComponentReport& c) {
  if (status_is_ok(c.status)) return "ok";
  return c.required ? "bad" : "warn";
}
const char* badge_colour(const char* cls) {
  if (std::string(cls) == "ok") return "#2e7d32";
  if (std::string(cls) == "bad") return "#c62828";
  return "#b26a00";
}

std::string badge(const char* cls, const std::string& text) {
  return std::string("<span class=\"badge ") + cls + "\" style=\"background:" + badge_colour(cls) +
         ";color:#fff;border-radius:3px;padding:1px 6px;white-space:nowrap\">" + html_escape(text) +
         "</span>";
}

}  // namespace

std::string report_to_html_table(const AuditReport& r) {
  std::string h =
      "<table class=\"audit\">\n<thead><tr><th>component</th><th>status</th>"
      "<th>evidence</th><th>consequence</th><th>fix</th></tr></thead>\n<tbody>\n";
  for (const auto& c : r.components) {
    h += "<tr><td>" + html_escape(component_name(c.component)) + "</td><td>" +
         badge(badge_class(c), status_name(c.status)) + "</td><td>" + html_escape(c.evidence) +
         "</td><td>" + html_escape(c.consequence) + "</td><td>" + html_escape(c.fix) +
         "</td></tr>\n";
  }
  h += "</tbody>\n</table>\n";
  std::string items;
  for (const auto& f : r.findings) {
    const char* cls = f.severity == Severity::kError     ? "bad"
                      : f.severity == Severity::kWarning ? "warn"
                                                         : "ok";
    items +=
        "<li>" + badge(cls, severity_name(f.severity)) + " " +
        (f.component ? "<code>" + html_escape(component_name(*f.component)) + "</code> " : "") +
        html_escape(f.message) + "</li>\n";
  }
  if (!items.empty()) h += "<ul class=\"findings\">\n" + items + "</ul>\n";
  return h;
}

}  // namespace ckpt::verify
