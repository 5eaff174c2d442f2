// `ckpt coverage RUN_DIR | HF_DIR | --run-spec FILE.json`: what fraction of the dataset a restarted
// run really visited, per epoch: unique samples, repeats, never-visited positions and ids. The work
// is in cli/commands.h (runners) and analytics/ (the library); this file binds the flags.
#include <CLI/CLI.hpp>
#include <iostream>
#include <memory>

#include "cli/command.h"
#include "cli/commands.h"

namespace ckpt::cli {
Runner setup_coverage(CLI::App& root, CLI::App*& sub, const Context& ctx) {
  auto o = std::make_shared<CoverageCommandOptions>();
  sub = root.add_subcommand("coverage",
                            "Dataset coverage across restarts: per-epoch unique fraction, "
                            "repeats and never-visited samples");
  sub->add_option("run_dir", o->run_dir,
                  "Our run directory (journal.jsonl), a Hugging Face Trainer output folder "
                  "(checkpoint-N/, training_args.bin, TensorBoard logs), or a folder of Lightning "
                  ".ckpt files or torch.save files holding StatefulDataLoader states");
  sub->add_option("--dataset-size", o->dataset_size,
                  "Hugging Face, Lightning and StatefulDataLoader runs: the number of training "
                  "samples (not in the folder)");
  sub->add_option("--batch-size", o->batch_size,
                  "Lightning / StatefulDataLoader runs: the batch size, when the checkpoints do "
                  "not hold it");
  sub->add_flag("--print-spec", o->print_spec,
                "Hugging Face folders: print the derived run spec (JSON for --run-spec) and stop");
  sub->add_option("--run-spec", o->run_spec,
                  "A foreign run: JSON with dataset_size, batch_size, world_size, grad_accum, "
                  "sampler and segments");
  sub->add_option("--max-ids", o->max_ids, "Never-visited ids listed per epoch in --json")
      ->capture_default_str();
  sub->add_flag("--json", o->json, "JSON on stdout");
  sub->add_option("--svg", o->svg_path, "Write the per-epoch strip chart (SVG) to this file");
  return [o, ctx] { return run_coverage_command(*o, ctx.env, std::cout, std::cerr); };
}

}  // namespace ckpt::cli
