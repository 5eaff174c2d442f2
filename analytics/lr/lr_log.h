// Scalar logs with launches: the common shape of the foreign logs `ckpt lr` reads (TensorBoard
// event files, MLflow metric files, Lightning's metrics.csv), and how LR series come out of them.
//
// A ScalarLog is one or more launches (processes), each a list of (tag, step, value, wall time)
// samples in the order written. lr_series_from_log() builds one LrSeries per LR tag:
//   1. Launches are taken in the order given (readers sort event files by their first wall time).
//      Inside a launch, a step of a tag lower than that tag's step before starts a new launch
//      (the process was relaunched into the same file or metric from an older checkpoint).
//   2. Each launch after the first is a restart at its first step. Points the earlier launches
//      logged at or after that step are dropped — the later launch wins — and reported as
//      RedoneSteps. Repeated steps inside one launch: the last value wins.
//   3. Inside a launch, a wall-time gap longer than kGapFactor times the median gap and longer
//      than kMinGapSeconds is an inferred restart at the step after the gap (a job that stopped
//      and resumed into the same file). Launches with fewer than kMinGapsForCadence gaps infer
//      nothing.
//
// Pure functions of their inputs; thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "analytics/lr/lr_input.h"
#include "ckpt/base/status.h"

namespace ckpt::analytics {

constexpr double kGapFactor = 20;
constexpr double kMinGapSeconds = 120;
constexpr size_t kMinGapsForCadence = 8;

// Caps on what `ckpt lr` reads (docs/cli.md): one file, the files of one TensorBoard tree, the
// folders walked to find them.
constexpr uint64_t kMaxLogFileBytes = 512ull << 20;
constexpr uint64_t kMaxLogTreeBytes = 2048ull << 20;
constexpr size_t kMaxLogTreeFiles = 10000;
constexpr int kMaxLogTreeDepth = 32;

struct ScalarSample {
  std::string tag;
  int64_t step = 0;
  double value = 0;
  double wall_time = 0;  // seconds since the epoch; 0 when unknown
};

struct ScalarLaunch {
  std::string source;
  double start_wall_time = 0;
  std::vector<ScalarSample> samples;  // in the order written
};

struct ScalarLog {
  std::string source;
  std::string format;  // "tensorboard", "mlflow", "csv"
  std::vector<ScalarLaunch> launches;
  std::vector<std::string> warnings;
};

// Whether a tag names a learning rate: a '/'-separated component `lr`, `learning_rate`,
// `learning-rate`, `lr-<Optimizer>` (Lightning's LearningRateMonitor) or `lr_<n>`, followed
// only by param-group components (`pg1`, `group0`, `param_group_1`, digits).
bool is_lr_tag(const std::string& tag);
// Sort order of series: exact "lr" first, then by tag with digit runs compared as numbers
// ("lr-AdamW/pg2" before "lr-AdamW/pg10").
bool lr_tag_order(const std::string& a, const std::string& b);

// On failure corrupt when the log has no LR tag (naming a few tags it has), invalid_argument
// when `tag` is given and absent (listing the LR tags it has).
Result<std::vector<LrSeries>> lr_series_from_log(const ScalarLog& log, const std::string& tag);

}  // namespace ckpt::analytics
