// The bodies of `ckpt lr`, `ckpt coverage` and `ckpt report`: options structs and runners that
// write the result to `out` (text or JSON) and diagnostics to `err`, and return the exit code.
// cli/cmd_lr.cc, cli/cmd_coverage.cc and cli/cmd_report.cc only bind CLI11 flags to these
// structs, so tests drive the commands without argv or a process. Exit codes are those of
// cli/exit_codes.h: 0 ok (lr: no discontinuity), 2 findings (lr: discontinuities or post-restart
// LRs off the schedule), 64 usage, 65 unreadable input, 66 cannot open the input, 1 internal.
// The work itself is library code (analytics/, report/) that returns Status/Result; these runners
// map it to exit codes through the one mapping, exit_code_for (cli/exit_codes.h).
//
// Runners are reentrant; they share no state.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "ckpt/base/status.h"
#include "ckpt/io/env.h"
#include "verify/formats/format_reader.h"

namespace ckpt::cli {

struct LrCommandOptions {
  // run directory, CSV (Lightning metrics.csv), JSONL, trainer_state.json, TensorBoard event
  // file or folder, MLflow run folder or metric file
  std::string input;
  std::string format = "auto";  // auto | run | csv | jsonl | trainer_state | tensorboard | mlflow
  std::string tag;              // only this series (default: every LR series found)
  std::vector<int64_t> restarts;
  std::vector<int64_t> milestones;
  bool json = false;
  std::string svg_path;  // write the chart here when set
};
// `ckpt lr`, every input read through `env` (the executable passes Env::posix()).
int run_lr_command(const LrCommandOptions& o, Env* env, std::ostream& out, std::ostream& err);

struct CoverageCommandOptions {
  std::string run_dir;        // our run (journal) or a Hugging Face Trainer output folder, or
  std::string run_spec;       // a foreign run described in JSON
  uint64_t dataset_size = 0;  // Hugging Face folders: the one fact they do not hold
  uint32_t batch_size = 0;    // Lightning / StatefulDataLoader runs: when not in the checkpoints
  bool print_spec = false;    // Hugging Face folders: print the derived run spec and stop
  uint64_t max_ids = 100000;
  bool json = false;
  std::string svg_path;
};
// `ckpt coverage`, every input read through `env` (the executable passes Env::posix()).
int run_coverage_command(const CoverageCommandOptions& o, Env* env, std::ostream& out,
                         std::ostream& err);

struct VerifyCommandOptions {
  std::string path;  // a step directory, or a run directory (every checkpoint is checked)
  bool json = false;
};
// `ckpt verify` through `env`: 0 every committed checkpoint intact, 2 damaged (or only
// interrupted saves), 65 not a ckpt checkpoint, 66 cannot open the input or a file of a
// checkpoint, or every checkpoint was removed while verifying. With `readers`, a path that is
// another format they recognise (a DCP folder, a torch.save file) is 65 still, and the message
// says that `ckpt audit PATH` checks it.
int run_verify_command(const VerifyCommandOptions& o, Env* env, std::ostream& out,
                       std::ostream& err, const verify::ReaderSet* readers = nullptr);

struct ReportCommandOptions {
  std::string run_dir;
  std::string html_path;
};
// `ckpt report` through `env`, auditing the latest checkpoint with `readers`.
int run_report_command(const ReportCommandOptions& o, Env* env, const verify::ReaderSet& readers,
                       std::ostream& out, std::ostream& err);

// Writes `text` to `path` (replacing it). io_error naming the path on failure.
Status write_text_file(const std::string& path, const std::string& text);

}  // namespace ckpt::cli
