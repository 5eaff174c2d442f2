// Runs ckpt-train-demo in fresh processes and reads what it left behind: its last stdout line
// (final_params_xxh3) and the journal's per-step progress (LR, loss, batch digest).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace ckpt::testing {

struct DemoResult {
  int exit_code = -1;
  std::string output;
  std::string final_digest;  // from the last line "final_params_xxh3 <hex>"
};

// `args` are appended to the demo's command line; `run_dir` is passed as --run-dir.
DemoResult run_demo(const std::string& run_dir, const std::string& args);

struct StepRecord {
  double lr = 0;
  double loss = 0;
  std::string batch;  // xxh3 of the batch's sample ids
  uint64_t epoch = 0;
  uint64_t position = 0;
};

// step → the LAST progress record of that step (steps redone after a crash replace the first).
std::map<int64_t, StepRecord> read_progress(const std::string& run_dir);
// Every progress record in journal order (redone steps included).
std::vector<std::pair<int64_t, StepRecord>> read_all_progress(const std::string& run_dir);

}  // namespace ckpt::testing
