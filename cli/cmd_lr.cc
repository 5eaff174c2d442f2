// `ckpt lr INPUT`: the learning rate across restarts — from a run directory (journal), a CSV or
// JSONL log, Hugging Face's trainer_state.json, TensorBoard event files or an MLflow run. Finds and
// classifies discontinuities; with the run's schedule spec, compares every post-restart LR with the
// expected one. The work is in cli/commands.h; this file binds the flags.
#include <CLI/CLI.hpp>
#include <iostream>
#include <memory>

#include "cli/command.h"
#include "cli/commands.h"

namespace ckpt::cli {
Runner setup_lr(CLI::App& root, CLI::App*& sub, const Context& ctx) {
  auto o = std::make_shared<LrCommandOptions>();
  sub = root.add_subcommand("lr",
                            "Learning rate across restarts: discontinuities, their kind, "
                            "and the error against the schedule (exit 2 when found)");
  sub->add_option("input", o->input,
                  "Run directory (journal.jsonl), CSV/JSONL log with step and lr or "
                  "learning_rate (Lightning metrics.csv), trainer_state.json, TensorBoard event "
                  "file or folder, MLflow run folder or metric file")
      ->required();
  sub->add_option("--format", o->format,
                  "auto (from the content), run, csv, jsonl, trainer_state, tensorboard or mlflow")
      ->capture_default_str()
      ->check(
          CLI::IsMember({"auto", "run", "csv", "jsonl", "trainer_state", "tensorboard", "mlflow"}));
  sub->add_option("--tag", o->tag,
                  "Only this series (default: every LR series found, e.g. train/learning_rate, "
                  "lr-AdamW/pg1)");
  sub->add_option("--restarts", o->restarts, "Known restart steps, e.g. 300,650")->delimiter(',');
  sub->add_option("--milestones", o->milestones,
                  "Declared step-decay milestones (jumps there are the schedule's own)")
      ->delimiter(',');
  sub->add_flag("--json", o->json, "JSON on stdout");
  sub->add_option("--svg", o->svg_path, "Write the LR chart (SVG) to this file");
  return [o, ctx] { return run_lr_command(*o, ctx.env, std::cout, std::cerr); };
}

}  // namespace ckpt::cli
