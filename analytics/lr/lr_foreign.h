// Readers of the foreign logs `ckpt lr` understands beyond our journal: TensorBoard event files
// (one file, or a tree of them as TensorBoard reads a log directory), MLflow's file store
// (mlruns/<experiment>/<run>/metrics/<key>, lines "timestamp_ms value step") and CSV logs whose
// header names a step column and one or more LR columns (Lightning's CSVLogger metrics.csv with
// LearningRateMonitor's `lr-AdamW`, `lr-AdamW/pg1` ...). Each returns a ScalarLog (lr_log.h).
//
// Every file read is capped (lr_log.h: kMaxLogFileBytes per file; a tree at kMaxLogTreeFiles
// files, kMaxLogTreeBytes in all, kMaxLogTreeDepth folders deep); only regular files are read,
// every one through the Env passed in.
// Thread-safe.
#pragma once

#include <string>
#include <string_view>

#include "analytics/lr/lr_log.h"
#include "ckpt/base/status.h"
#include "ckpt/io/env.h"

namespace ckpt::analytics {

// One launch per event file, sorted by the wall time of each file's first event. A torn last
// record becomes a warning; the records before it are used. On failure not_found when `path`
// holds no event file, corrupt for an event file that is damaged before its end.
Result<ScalarLog> scalar_log_from_tensorboard(Env* env, const std::string& path);
// The event-file bytes of one launch (for tests and the fuzzer).
Result<ScalarLog> scalar_log_from_event_bytes(std::string_view bytes, const std::string& path);

// RUN is an MLflow run folder (holding metrics/) or its metrics/ folder; every file under it is
// a metric named by its path below metrics/; LR metrics are read, and the one named `tag` when
// given. One launch: a relaunch into the same run shows as a step rewind or a wall-time gap.
Result<ScalarLog> scalar_log_from_mlflow_run(Env* env, const std::string& run_dir,
                                             const std::string& tag);
// One metric file's text; `tag` is the metric's name.
Result<ScalarLog> scalar_log_from_mlflow_text(const std::string& text, const std::string& path,
                                              const std::string& tag);
// True when the first non-empty line is three numbers separated by single spaces.
bool looks_like_mlflow_metric(std::string_view text);

// Lightning's CSVLogger folder: every metrics.csv one or two folders below `dir`
// (version_N/metrics.csv, NAME/version_N/metrics.csv) is one launch, in version order (numbers
// compared as numbers). not_found when there is none.
Result<ScalarLog> scalar_log_from_csv_versions(Env* env, const std::string& dir);

// A CSV log: header with "step" and LR columns (lr_log.h's is_lr_tag); empty LR cells skipped.
Result<ScalarLog> scalar_log_from_csv_text(const std::string& text, const std::string& path);

}  // namespace ckpt::analytics
