// `ckpt report`: build the HTML page (report/report_html.h) and write it.
#include "cli/commands.h"
#include "cli/diagnostics.h"
#include "cli/exit_codes.h"
#include "report/report_html.h"

namespace ckpt::cli {

int run_report_command(const ReportCommandOptions& o, Env* env, const verify::ReaderSet& readers,
                       std::ostream& out, std::ostream& err) {
  if (o.html_path.empty()) {
    err << "ckpt report: --html FILE is required\n";
    return kExitUsage;
  }
  auto report = report::build_run_report(env, readers, o.run_dir);
  if (!report.is_ok()) {
    print_diagnostic(err, "report", report.status().message());
    return exit_code_for(report.status());
  }
  Status st = write_text_file(o.html_path, report->html);
  if (!st.is_ok()) {
    print_diagnostic(err, "report", st.message());
    return exit_code_for(st);
  }
  out << "ckpt report: wrote " << o.html_path << (report->findings ? " (with findings)" : "")
      << "\n";
  return report->findings ? kExitFindings : kExitOk;
}

}  // namespace ckpt::cli
