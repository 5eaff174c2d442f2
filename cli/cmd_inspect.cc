// `ckpt inspect PATH [--json]`: the tree of what is inside a checkpoint (keys, dtypes, shapes,
// byte sizes, devices, opaque globals), like `h5ls -r` for torch.save, safetensors, HF,
// Lightning, DCP and our own format. Reads metadata only. Documented in docs/cli.md.
#include <CLI/CLI.hpp>
#include <iostream>
#include <memory>

#include "cli/command.h"
#include "cli/diagnostics.h"
#include "cli/exit_codes.h"
#include "verify/audit/audit.h"

namespace ckpt::cli {

struct InspectCliOptions {
  std::string path;
  bool json = false;
};

int run_inspect(const InspectCliOptions& o, const Context& ctx) {
  auto v = verify::inspect_path(*ctx.readers, ctx.env, o.path);
  if (!v.is_ok()) {
    print_diagnostic(std::cerr, "inspect", v.status().to_string());
    return exit_code_for(v.status());
  }
  for (const auto& f : v->findings) {  // e.g. a damaged checkpoint newer than the one shown
    if (f.severity == verify::Severity::kError) {
      print_diagnostic(std::cerr, "inspect", "warning: " + std::string(f.message));
    }
  }
  if (o.json) {
    nlohmann::json j = {{"path", v->path},
                        {"format", verify::format_name(v->format)},
                        {"contents", verify::inspect_to_json(v->contents)}};
    std::cout << verify::json_text(j) << "\n";
  } else {
    std::cout << verify::format_name(v->format) << ": " << verify::inspect_to_text(v->contents);
  }
  return kExitOk;
}

Runner setup_inspect(CLI::App& root, CLI::App*& sub, const Context& ctx) {
  auto opts = std::make_shared<InspectCliOptions>();
  sub = root.add_subcommand(
      "inspect", "Show the tree inside a checkpoint (keys, dtypes, shapes, sizes, devices)");
  sub->add_option("PATH", opts->path, "checkpoint file or folder")->required();
  sub->add_flag("--json", opts->json, "print one JSON object");
  sub->footer(kExitCodeHelp);
  return [opts, ctx] { return run_inspect(*opts, ctx); };
}

}  // namespace ckpt::cli
