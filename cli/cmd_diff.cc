// `ckpt diff A B [--deep] [--json]`: two checkpoints of any format audit reads, side by side
// (component statuses, counters, LRs, hyperparameters, model tensors, config/environment digests).
// Exit 0 when nothing differs, 2 when something does, 64/65/66 as audit. Documented in docs/cli.md.
#include <CLI/CLI.hpp>
#include <iostream>
#include <memory>

#include "cli/command.h"
#include "cli/diagnostics.h"
#include "cli/exit_codes.h"
#include "verify/audit/audit.h"
#include "verify/audit/diff.h"

namespace ckpt::cli {

struct DiffCliOptions {
  std::string a, b;
  bool json = false;
  bool deep = false;
};

int run_diff(const DiffCliOptions& o, const Context& ctx) {
  auto d = verify::diff_paths(*ctx.readers, ctx.env, o.a, o.b, o.deep);
  if (!d.is_ok()) {
    print_diagnostic(std::cerr, "diff", d.status().to_string());
    return exit_code_for(d.status());
  }
  if (o.json) {
    std::cout << verify::json_text(verify::diff_to_json(*d)) << "\n";
  } else {
    std::cout << verify::diff_to_text(*d);
  }
  return d->differences == 0 ? kExitOk : kExitFindings;
}

Runner setup_diff(CLI::App& root, CLI::App*& sub, const Context& ctx) {
  auto opts = std::make_shared<DiffCliOptions>();
  sub = root.add_subcommand("diff",
                            "Compare two checkpoints (any format audit reads): statuses, counters, "
                            "LRs, hyperparameters, tensors, config/environment digests");
  sub->add_option("A", opts->a, "first checkpoint file or folder")->required();
  sub->add_option("B", opts->b, "second checkpoint file or folder")->required();
  sub->add_flag("--json", opts->json, "print one JSON object");
  sub->add_flag("--deep", opts->deep,
                "also read the model tensors' bytes and compare values (max |a-b| per tensor)");
  sub->footer(kExitCodeHelp);
  return [opts, ctx] { return run_diff(*opts, ctx); };
}

}  // namespace ckpt::cli
