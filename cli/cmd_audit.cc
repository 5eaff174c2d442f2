// `ckpt audit PATH [--deep] [--require LIST] [--json]`: says, for every component of the
// completeness contract, whether a checkpoint (ours or PyTorch / HF / Lightning / DCP /
// safetensors) holds it, with evidence, consequence and fix. Exit codes in cli/exit_codes.h;
// documented in docs/cli.md.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <iostream>
#include <memory>

#include "cli/command.h"
#include "cli/diagnostics.h"
#include "cli/exit_codes.h"
#include "verify/audit/audit.h"

namespace ckpt::cli {

struct AuditCliOptions {
  std::string path;
  bool deep = false;
  bool json = false;
  std::string require;
};

int run_audit(const AuditCliOptions& o, const Context& ctx) {
  verify::AuditOptions ao;
  ao.deep = o.deep;
  ao.progress = o.deep && !o.json;
  if (!o.require.empty()) {
    auto req = verify::parse_component_list(o.require);
    if (!req.is_ok()) {
      print_diagnostic(std::cerr, "audit", req.status().message());
      return kExitUsage;
    }
    ao.require = *req;
  }
  auto r = verify::audit_path(*ctx.readers, ctx.env, o.path, ao);
  if (!r.is_ok()) {
    print_diagnostic(std::cerr, "audit", r.status().to_string());
    return exit_code_for(r.status());
  }
  if (o.json) {
    std::cout << verify::json_text(verify::report_to_json(*r)) << "\n";
  } else {
    std::cout << verify::report_to_text(*r, ::isatty(1) != 0);
  }
  return r->complete ? kExitOk : kExitFindings;
}

constexpr const char* kAuditReads =
    "PATH is read without executing any pickle: a torch.save file (.pt, .pth, .ckpt, .bin:\n"
    "plain PyTorch, Lightning, timm, mmengine, Composer, torchvision's reference scripts,\n"
    "nanoGPT...), safetensors, an HF Trainer / Accelerate / save_pretrained folder (PEFT\n"
    "adapters too), a DCP, DeepSpeed, Megatron-LM or torchtune folder, or a ckpt run or step\n"
    "directory (local or s3://bucket/prefix).\n\n";

Runner setup_audit(CLI::App& root, CLI::App*& sub, const Context& ctx) {
  auto opts = std::make_shared<AuditCliOptions>();
  sub = root.add_subcommand("audit",
                            "Say which parts of the training state a checkpoint holds: model, "
                            "optimizer, scheduler, RNG, loader, counters (+ grad scaler)");
  sub->add_option("PATH", opts->path, "checkpoint file or folder (see below)")->required();
  sub->add_flag("--deep", opts->deep, "also read tensor bytes: CRC-32, NaN/Inf, all-zero moments");
  sub->add_option("--require", opts->require,
                  "comma list of components that decide the exit code (default: all)");
  sub->add_flag("--json", opts->json, "print one JSON object");
  sub->footer(std::string(kAuditReads) + kExitCodeHelp);
  return [opts, ctx] { return run_audit(*opts, ctx); };
}

}  // namespace ckpt::cli
