// `ckpt lr`: load the series, analyse it, print text or JSON, optionally write the SVG.
#include <fstream>

#include "analytics/lr/lr_analysis.h"
#include "analytics/lr/lr_input.h"
#include "analytics/render/lr_chart.h"
#include "analytics/render/lr_report.h"
#include "cli/commands.h"
#include "cli/diagnostics.h"
#include "cli/exit_codes.h"

namespace ckpt::cli {

Status write_text_file(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f) return io_error(path + ": cannot open for writing");
  f << text;
  f.close();
  if (!f) return io_error(path + ": write failed");
  return Status::ok();
}

int run_lr_command(const LrCommandOptions& o, Env* env, std::ostream& out, std::ostream& err) {
  auto series = analytics::load_lr_log(env, o.input, o.format, o.tag);
  if (!series.is_ok()) {
    print_diagnostic(err, "lr", series.status().message());
    return exit_code_for(series.status());
  }
  for (const auto& w : series->front().warnings)
    print_diagnostic(err, "lr", "warning: " + std::string(w));
  analytics::LrOptions opts;
  opts.restarts = o.restarts;
  opts.milestones = o.milestones;
  opts.use_inferred_restarts = o.restarts.empty();
  std::vector<analytics::LrAnalysis> analyses;
  bool findings = false;
  for (const auto& s : *series) {
    analyses.push_back(analytics::analyze_lr(s, opts));
    findings |= analyses.back().has_findings();
  }
  if (!o.svg_path.empty()) {
    Status st =
        write_text_file(o.svg_path, analytics::lr_chart_svg(series->front(), analyses.front()));
    if (!st.is_ok()) {
      print_diagnostic(err, "lr", st.message());
      return exit_code_for(st);
    }
  }
  // Names from the input (tags, file names) may hold invalid UTF-8: escaped, never a throw.
  if (o.json) {
    out << json_text(analytics::lr_log_to_json(*series, analyses)) << "\n";
  } else {
    analytics::print_lr_log_text(*series, analyses, out);
  }
  return findings ? kExitFindings : kExitOk;
}

}  // namespace ckpt::cli
