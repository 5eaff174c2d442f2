// The run spec of a Hugging Face Trainer run, derived from its output folder instead of written
// by hand (`ckpt coverage HF_DIR`). What the folder tells:
//   - checkpoint-N/ folders: the checkpoint steps; rng_state_<rank>.pth files: the world size
//     (rng_state.pth alone: one process); trainer_state.json: global_step, save_steps,
//     logging_steps, train_batch_size;
//   - training_args.bin (read by the caller without executing it, cli/hf_training_args.cc):
//     per-device batch size, gradient accumulation, seed / data_seed, dataloader_drop_last,
//     ignore_data_skip;
//   - the TensorBoard event files under the folder (report_to tensorboard): one per launch; a
//     launch's first and last logged steps.
// What it cannot tell is asked for: the dataset size.
//
// Derivation. Launch k > 1 resumed from the newest checkpoint step below its first logged step
// (a multiple of save_steps); it ran to its last logged step (exact when logging_steps is 1, else
// up to logging_steps - 1 steps more are unseen). Segments [resume_k, last_k) in HF's global-step
// numbering (step s is the s-th optimizer step, so our 0-based steps are s - 1);
// loader_resumed = !ignore_data_skip (HF skips the consumed batches unless told not to). Sampler:
// transformers >= 4.38 with accelerate's seedable sampler — epoch e's order is torch.randperm(N)
// from a generator seeded (data_seed or seed) + e, global batches are consecutive chunks of it —
// which is the run spec's torch_distributed order (checked against a real 5.x run in
// tests/analytics/hf_coverage_test.cc).
//
// Pure functions apart from reading the folder; thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "analytics/coverage/run_spec.h"
#include "ckpt/base/status.h"
#include "ckpt/io/env.h"

namespace ckpt::analytics {

struct HfTrainingArgs {
  std::optional<int64_t> per_device_train_batch_size;
  std::optional<int64_t> gradient_accumulation_steps;
  std::optional<int64_t> seed;
  std::optional<int64_t> data_seed;
  std::optional<bool> dataloader_drop_last;
  std::optional<bool> ignore_data_skip;
};

struct HfLaunchSteps {
  std::string source;
  int64_t first_step = 0;  // HF global steps (1-based)
  int64_t last_step = 0;
};

struct HfRunFacts {
  std::string dir;
  std::vector<int64_t> checkpoint_steps;  // ascending
  std::string newest_checkpoint;          // folder of the highest step
  uint32_t world_size = 1;
  int64_t global_step = 0;
  int64_t save_steps = 0;
  int64_t logging_steps = 0;
  std::vector<HfLaunchSteps> launches;  // wall-time order; empty without event files
};

struct DerivedRunSpec {
  RunSpec spec;
  std::vector<std::string> assumptions;  // what was assumed, one sentence each
  std::string certainty;                 // "exact", "likely" or "uncertain", with why
};

// True when `dir` holds at least one checkpoint-N/ folder with a trainer_state.json.
bool is_hf_output_dir(Env* env, const std::string& dir);
// The folder's facts (no training_args.bin). On failure not_found without a checkpoint, corrupt
// for a malformed trainer_state.json or event file.
Result<HfRunFacts> scan_hf_output_dir(Env* env, const std::string& dir);
// On failure invalid_argument naming what is missing: the dataset size (--dataset-size), or a
// training argument that neither training_args.bin nor trainer_state.json gave.
Result<DerivedRunSpec> derive_hf_run_spec(const HfRunFacts& facts, const HfTrainingArgs& args,
                                          uint64_t dataset_size);
// The run spec as the JSON `--run-spec` reads (run_spec.h), for --print-spec.
std::string run_spec_json(const RunSpec& spec);

}  // namespace ckpt::analytics
