// Coverage of a PyTorch run derived from its checkpoints' loader states instead of a hand-written
// run spec (`ckpt coverage DIR`): a Lightning run's .ckpt series (global_step, epoch, the fit
// loop's batch progress, and the StatefulDataLoader state Lightning keeps in
// loops.fit_loop.state_dict.combined_loader when the loader is stateful), or torch.save'd
// checkpoints holding a torchdata StatefulDataLoader state_dict. The caller reads the files
// without executing them (cli/loader_checkpoint.cc) and fills LoaderCheckpoint; this decides.
//
// Derivation.
//   1. Launches come from the run's logs (TensorBoard event files, else Lightning CSVLogger
//      version_N/metrics.csv): a launch logged 0-based steps first..last; launch k > 1 resumed
//      from the newest checkpoint whose global_step <= its first step and ran to last + 1.
//      Without logs one launch through the last checkpoint is assumed (restarts unknown).
//   2. A checkpoint's loader cursor: a StatefulDataLoader state says how many batches of the
//      epoch the loop received (_num_yielded; with workers the snapshot step plus the steps since
//      it) — the loader resumes exactly there, a finished epoch at the next one's start. Without
//      a loader state Lightning restarts the epoch with a fresh loader: the batches left
//      (steps per epoch − batches done) read positions [0, ...) of a new shuffle.
//   3. Orders. A StatefulDataLoader's RandomSampler saves its generator state from before the
//      epoch's randperm: that epoch's permutation is torch.randperm from that state
//      (torch_randperm.h), and the next epochs' follow by drawing on (each epoch draws one
//      randperm). A launch whose loader was not restored shuffles with an unseeded generator:
//      its orders are unknown and the coverage of epochs that mix them is bounded (coverage.h).
//      A loader without a generator state (SequentialSampler) reads the dataset in order.
//   4. The dataset size is asked for; the batch size comes from the loader state
//      (samples_yielded / batches), else Lightning's hyper_parameters["batch_size"], else asked.
//      Steps per epoch are checked against a Lightning checkpoint taken at an epoch's last batch.
//
// Pure functions of their inputs apart from reading logs; thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "analytics/coverage/coverage.h"
#include "ckpt/base/status.h"
#include "ckpt/io/env.h"

namespace ckpt::analytics {

// torchdata StatefulDataLoader.state_dict(), the fields coverage needs.
struct LoaderState {
  std::string where;    // its path inside the checkpoint, for evidence
  int64_t batches = 0;  // batches the loop received this epoch
  // The BatchSampler iterator's samples and the batches drawn from it, at the same moment (the
  // last snapshot with workers); give the batch size.
  std::optional<int64_t> samples_yielded;
  std::optional<int64_t> sampler_batches;
  bool finished = false;        // _iterator_finished: the epoch's iterator was exhausted
  std::string generator_state;  // RandomSampler's, before the epoch's randperm; empty if none
  int workers = 0;
};

struct LoaderCheckpoint {
  std::string source;
  bool lightning = false;
  int64_t step = 0;                         // optimizer steps done (global_step)
  std::optional<int64_t> epoch;             // the loop's epoch counter
  std::optional<int64_t> batches_in_epoch;  // Lightning batch_progress.current.ready
  bool last_batch = false;                  // Lightning batch_progress.is_last_batch
  std::optional<int64_t> batch_size_hparam;
  std::optional<LoaderState> loader;
};

struct LaunchSteps {
  std::string source;
  int64_t first_step = 0;  // 0-based steps the launch logged
  int64_t last_step = 0;
};

struct RestartEvidence {
  int64_t step = 0;  // the checkpoint's global_step the launch resumed from
  std::string checkpoint;
  bool loader_resumed = false;
  uint64_t epoch = 0;
  uint64_t position = 0;  // epoch position the launch's first batch read
  std::string evidence;
};

struct DerivedLoaderRun {
  CoverageInput input;
  std::string kind;  // "lightning" or "stateful_dataloader"
  std::vector<LaunchSteps> launches;
  std::vector<RestartEvidence> restarts;
  std::vector<std::string> assumptions;
  std::string certainty;
};

// The launches logged under `dir`: TensorBoard event files, else Lightning CSVLogger
// version_N/metrics.csv (the `step` column). Empty when there are none; corrupt for a damaged log.
Result<std::vector<LaunchSteps>> launches_from_logs(Env* env, const std::string& dir);
// One metrics.csv's text; first_step -1 when it logged no step. Corrupt for a header without
// `step` or a step cell that is not a non-negative integer.
Result<LaunchSteps> launch_from_csv_text(const std::string& text, const std::string& path);

// On failure invalid_argument naming what is missing (--dataset-size, --batch-size) or
// inconsistent (the steps per epoch a checkpoint shows), corrupt for checkpoints that contradict
// the logs (a launch with no checkpoint to resume from).
Result<DerivedLoaderRun> derive_loader_run(std::vector<LoaderCheckpoint> cks,
                                           const std::vector<LaunchSteps>& launches,
                                           uint64_t dataset_size, uint32_t batch_size_flag);

}  // namespace ckpt::analytics
