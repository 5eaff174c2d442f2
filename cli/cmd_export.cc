// `ckpt export RUN|STEP --to safetensors OUT_DIR [--with-optimizer] [--max-shard-size SIZE]
// [--json]`: the model of a ckpt checkpoint (sharded or plain) as consolidated safetensors files,
// as a Hugging Face model folder holds them (verify/export/export.h). Exit codes in
// cli/exit_codes.h; documented in docs/cli.md.
#include <CLI/CLI.hpp>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "ckpt/format/printable.h"
#include "cli/command.h"
#include "cli/diagnostics.h"
#include "cli/exit_codes.h"
#include "verify/export/export.h"

namespace ckpt::cli {

struct ExportCliOptions {
  std::string input;
  std::string to;
  std::string out_dir;
  bool with_optimizer = false;
  std::string max_shard_size = "5GB";
  bool json = false;
};

int run_export(const ExportCliOptions& o, const Context& ctx) {
  if (o.to != "safetensors") {
    print_diagnostic(std::cerr, "export",
                     "--to " + o.to + ": the only format ckpt exports to is safetensors");
    return kExitUsage;
  }
  auto max = verify::parse_shard_size(o.max_shard_size);
  if (!max.is_ok()) {
    print_diagnostic(std::cerr, "export", "--max-shard-size: " + max.status().message());
    return kExitUsage;
  }
  verify::ExportOptions eo;
  eo.path = o.input;
  eo.out_dir = o.out_dir;
  eo.with_optimizer = o.with_optimizer;
  eo.max_shard_bytes = *max;
  verify::ExportReport r;
  verify::ExportFailure failure = verify::ExportFailure::kNone;
  const Status s = verify::export_safetensors(ctx.env, eo, &r, &failure);
  if (!s.is_ok()) {
    print_diagnostic(std::cerr, "export", s.to_string());
    switch (failure) {
      case verify::ExportFailure::kDamaged:
        return kExitFindings;
      case verify::ExportFailure::kOutput:
        return kExitNoInput;
      default:
        return exit_code_for(s);
    }
  }
  if (o.json) {
    nlohmann::json files = nlohmann::json::array();
    for (const auto& f : r.files)
      files.push_back({{"name", f.name}, {"bytes", f.bytes}, {"tensors", f.tensors}});
    nlohmann::json doc = {{"path", o.input},
                          {"checkpoint", r.step_dir},
                          {"format_version", r.format_version},
                          {"out_dir", o.out_dir},
                          {"files", files},
                          {"tensors", r.tensors},
                          {"tensor_bytes", r.tensor_bytes},
                          {"hashes_checked", r.boxes_checked},
                          {"dropped_prefix", r.dropped_prefix}};
    std::cout << json_text(doc) << "\n";
    return kExitOk;
  }
  std::cout << "exported " << printable_line(r.step_dir) << " (format version " << r.format_version
            << "): " << r.tensors << " tensors, " << r.tensor_bytes << " bytes, " << r.boxes_checked
            << " hashes checked\n";
  if (!r.dropped_prefix.empty()) {
    std::cout << "  model tensors named without the wrapper prefix \""
              << printable_line(r.dropped_prefix) << "\" every one had\n";
  }
  for (const auto& f : r.files) {
    std::cout << "  " << printable_line(f.name) << "  " << f.bytes << " bytes";
    if (f.tensors > 0) std::cout << ", " << f.tensors << " tensors";
    std::cout << "\n";
  }
  return kExitOk;
}

constexpr const char* kExportHelp =
    "Writes the model of a ckpt checkpoint as whole tensors in safetensors files: from a\n"
    "sharded checkpoint (format version 2) each tensor is assembled from its boxes through the\n"
    "INDEX, one tensor in memory at a time, every box's XXH3 checked before its bytes are\n"
    "written; from a plain one, rank 0's file. OUT_DIR/model.safetensors, or above\n"
    "--max-shard-size model-00001-of-0000N.safetensors ... with model.safetensors.index.json as\n"
    "Hugging Face writes it. --with-optimizer adds optimizer.safetensors (the per-parameter\n"
    "state: state.<param>.exp_avg, ...), split the same way. Files are written under temporary\n"
    "names and renamed once all are complete.\n\n"
    "Exit codes: 0 exported; 2 the checkpoint is damaged (a rank file missing or short, a hash\n"
    "mismatch, an INDEX that does not match COMMIT.json or whose boxes do not tile): nothing\n"
    "written; 64 usage; 65 not a ckpt checkpoint, or a tensor safetensors cannot hold; 66\n"
    "cannot open the input or write OUT_DIR.";

Runner setup_export(CLI::App& root, CLI::App*& sub, const Context& ctx) {
  auto o = std::make_shared<ExportCliOptions>();
  sub = root.add_subcommand("export",
                            "Write a ckpt checkpoint's model (and optimizer) as consolidated "
                            "safetensors files");
  sub->add_option("PATH", o->input, "a run directory (its newest checkpoint) or a step directory")
      ->required();
  sub->add_option("--to", o->to, "output format: safetensors")->required();
  sub->add_option("OUT_DIR", o->out_dir, "folder for the files (created when missing)")->required();
  sub->add_flag("--with-optimizer", o->with_optimizer,
                "also write the optimizer's state as optimizer.safetensors");
  sub->add_option("--max-shard-size", o->max_shard_size,
                  "split above this size: bytes, KB, MB, GB, KiB, MiB, GiB (default 5GB)");
  sub->add_flag("--json", o->json, "print one JSON object (docs/cli.md)");
  sub->footer(kExportHelp);
  return [o, ctx] { return run_export(*o, ctx); };
}

}  // namespace ckpt::cli
