// `ckpt convert IN OUT_DIR [--json]`: a torch.save file, Lightning .ckpt, Hugging Face Trainer /
// Accelerate folder, DCP folder or safetensors file becomes one committed ckpt checkpoint in the
// new run directory OUT_DIR, read without executing any pickle. Exit codes in cli/exit_codes.h;
// documented in docs/cli.md.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <iostream>
#include <memory>

#include "cli/command.h"
#include "cli/diagnostics.h"
#include "cli/exit_codes.h"
#include "verify/convert/convert.h"

namespace ckpt::cli {

struct ConvertCliOptions {
  std::string input;
  std::string out_dir;
  bool json = false;
};

int run_convert(const ConvertCliOptions& o, const Context& ctx) {
  verify::convert::ConvertOptions co;
  co.progress = !o.json && ::isatty(2) != 0;
  auto r = verify::convert::convert_checkpoint(ctx.env, *ctx.readers, o.input, o.out_dir, co);
  if (!r.is_ok()) {
    print_diagnostic(std::cerr, "convert", r.status().to_string());
    return exit_code_for(r.status());
  }
  if (o.json) {
    std::cout << verify::convert::report_json(*r) << "\n";
  } else {
    std::cout << verify::convert::report_text(*r);
  }
  return r->unmapped.empty() ? kExitOk : kExitFindings;
}

constexpr const char* kConvertHelp =
    "Reads IN with the auditor's readers, which never execute a pickle: a torch.save file\n"
    "(.pt/.pth/.bin, zip or legacy), a Lightning .ckpt, a Hugging Face Trainer checkpoint-N/ or\n"
    "Accelerate folder (model*.safetensors or pytorch_model*.bin, optimizer.pt, scheduler.pt,\n"
    "rng_state*.pth, trainer_state.json, ...), a torch.distributed.checkpoint folder, or a\n"
    "safetensors file. Writes OUT_DIR (absent or empty; a run is never overwritten) as a run\n"
    "directory with one committed checkpoint, step = the input's global step (0 if none):\n"
    "  /model      the model state dict, every tensor by name, bit for bit\n"
    "  /optimizer  the optimizer state dict (state per parameter, param_groups) and\n"
    "  /scheduler  the LR scheduler's, in torch's state_dict layout with counters and\n"
    "              hyperparameters as typed attributes (as the Python package stores them)\n"
    "  /rng        the CPU generator state (cpu/state), CUDA states (cuda/N), Python's\n"
    "              random and numpy's global RNG states beside them\n"
    "  /train      global_step, epoch (+ amp_loss_scale from a GradScaler)\n"
    "  /extra      everything else of the input, in its place\n"
    "What cannot be represented (pickled objects, sets, meta tensors, unreadable files) is\n"
    "listed as UNMAPPED and exits 2; the checkpoint still holds the rest.\n\n"
    "Exit codes: 0 converted completely; 2 converted, something listed as unmapped; 64 usage\n"
    "(or OUT_DIR not empty); 65 damaged input, not a checkpoint, or a format convert does not\n"
    "read (TorchScript, DeepSpeed, a ckpt run); 66 cannot open the input or write OUT_DIR.";

Runner setup_convert(CLI::App& root, CLI::App*& sub, const Context& ctx) {
  auto opts = std::make_shared<ConvertCliOptions>();
  sub = root.add_subcommand("convert",
                            "Convert a torch.save / Lightning / HF Trainer / DCP / safetensors "
                            "checkpoint into a committed ckpt checkpoint");
  sub->add_option("IN", opts->input, "foreign checkpoint file or folder")->required();
  sub->add_option("OUT_DIR", opts->out_dir, "new run directory (absent or empty)")->required();
  sub->add_flag("--json", opts->json, "print one JSON object (docs/cli.md)");
  sub->footer(kConvertHelp);
  return [opts, ctx] { return run_convert(*opts, ctx); };
}

}  // namespace ckpt::cli
