// `ckpt report RUN_DIR --html FILE`: one self-contained HTML page — the audit of the latest
// checkpoint, the LR chart, the coverage chart and the profiler's verdicts when its files are
// there. The work is in analytics/report_html.h; this file binds the flags.
#include <CLI/CLI.hpp>
#include <iostream>
#include <memory>

#include "analytics/commands.h"
#include "cli/command.h"

namespace ckpt::cli {
Runner setup_report(CLI::App& root, CLI::App*& sub) {
  auto o = std::make_shared<analytics::ReportCommandOptions>();
  sub = root.add_subcommand("report",
                            "One self-contained HTML page: audit of the latest "
                            "checkpoint, LR and coverage charts, profiler verdicts");
  sub->add_option("run_dir", o->run_dir, "Our run directory")->required();
  sub->add_option("--html", o->html_path, "Write the page to this file")->required();
  return [o] { return analytics::run_report_command(*o, std::cout, std::cerr); };
}

}  // namespace ckpt::cli
