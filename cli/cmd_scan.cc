// `ckpt scan PATH [--json]`: is this file safe to load? Lists every global the pickles of a
// file (or of every file in a folder) name, how risky each is, and what
// torch.load(weights_only=True) would do. Exit 0 nothing dangerous, 2 dangerous, 65 not a
// format scan reads / unreadable, 66 cannot open, 64 usage. Documented in docs/cli.md and
// docs/security.md.
#include <CLI/CLI.hpp>
#include <iostream>
#include <memory>

#include "cli/command.h"
#include "cli/diagnostics.h"
#include "cli/exit_codes.h"
#include "verify/scan/scan.h"

namespace ckpt::cli {

struct ScanCliOptions {
  std::string path;
  bool json = false;
};

int run_scan(const ScanCliOptions& o, const Context& ctx) {
  auto r = verify::scan_path(ctx.env, o.path);
  if (!r.is_ok()) {
    print_diagnostic(std::cerr, "scan", r.status().to_string());
    return exit_code_for(r.status());
  }
  if (o.json) {
    std::cout << json_text(verify::scan_report_to_json(*r)) << "\n";
  } else {
    std::cout << verify::scan_report_to_text(*r);
  }
  return r->safe() ? kExitOk : kExitFindings;
}

Runner setup_scan(CLI::App& root, CLI::App*& sub, const Context& ctx) {
  auto opts = std::make_shared<ScanCliOptions>();
  sub = root.add_subcommand("scan",
                            "Say whether a file (or every file of a folder) is safe to load: the "
                            "globals its pickles call, their risk, and what "
                            "torch.load(weights_only=True) would do; nothing is executed");
  sub->add_option("PATH", opts->path, "file or folder")->required();
  sub->add_flag("--json", opts->json, "print one JSON object");
  sub->footer(
      "Exit codes: 0 nothing dangerous; 2 at least one dangerous global; 64 usage error;\n"
      "65 not a format scan reads, or unreadable; 66 cannot open the input.");
  return [opts, ctx] { return run_scan(*opts, ctx); };
}

}  // namespace ckpt::cli
