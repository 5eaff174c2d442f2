// `ckpt report RUN_DIR --html FILE`: one self-contained HTML page — the audit of the latest
// checkpoint, the LR chart, the coverage chart and the profiler's verdicts when its files are
// there. The page is built by report/report_html.h and written by run_report_command
// (cli/commands.h); this file binds the flags.
#include <CLI/CLI.hpp>
#include <iostream>
#include <memory>

#include "cli/command.h"
#include "cli/commands.h"

namespace ckpt::cli {
Runner setup_report(CLI::App& root, CLI::App*& sub, const Context& ctx) {
  auto o = std::make_shared<ReportCommandOptions>();
  sub = root.add_subcommand("report",
                            "One self-contained HTML page: audit of the latest "
                            "checkpoint, LR and coverage charts, profiler verdicts");
  sub->add_option("run_dir", o->run_dir, "Our run directory")->required();
  sub->add_option("--html", o->html_path, "Write the page to this file")->required();
  return [o, ctx] { return run_report_command(*o, ctx.env, *ctx.readers, std::cout, std::cerr); };
}

}  // namespace ckpt::cli
