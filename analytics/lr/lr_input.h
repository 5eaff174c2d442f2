// Learning-rate series for `ckpt lr`: LR against step, read from any of the places a run leaves it
// — our run journal (with the restart steps and the schedule spec it records), a CSV log with a
// header naming `step` and `lr` or `learning_rate`, a JSONL log with the same keys, or Hugging
// Face's trainer_state.json (`log_history`). Every loader returns points sorted by step with one
// point per step: when a step appears more than once (a crash redid it after the restore) the
// LAST occurrence wins, because that is the LR the surviving run used.
//
// Loaders read every file through the Env they are given and own nothing beyond their return
// values; thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ckpt/base/status.h"
#include "ckpt/io/env.h"
#include "ckpt/sched/schedule.h"

namespace ckpt::analytics {

struct LrPoint {
  int64_t step = 0;
  double lr = 0;
};

// Steps a launch logged again because it resumed from a checkpoint older than the last step an
// earlier launch logged: the later launch wins, the earlier values of [first, last] are dropped.
struct RedoneSteps {
  int launch = 0;      // index into LrSeries::launches of the launch that redid them
  int64_t first = 0;   // the restart step (the redoing launch's first step)
  int64_t last = 0;    // the last step the earlier launches had logged
  int64_t points = 0;  // earlier points replaced or dropped
};

// One process's part of a log: an event file, or the steps between two step rewinds.
struct LrLaunch {
  std::string source;
  int64_t first_step = 0;
  int64_t last_step = 0;
  double start_wall_time = 0;  // seconds since the epoch; 0 when the log has no wall times
};

struct LrSeries {
  std::string source;  // the file or run directory read
  // "run", "csv", "jsonl", "trainer_state", "tensorboard", "mlflow"
  std::string format;
  std::string tag;                // the logged name of the series ("lr", "lr-AdamW/pg1", ...)
  std::vector<LrPoint> points;    // ascending steps, unique
  std::vector<int64_t> restarts;  // known restart steps, ascending (journals, launch boundaries)
  // Restarts inferred from wall-time gaps far beyond the logging cadence (lr_log.h), ascending.
  std::vector<int64_t> inferred_restarts;
  std::vector<LrLaunch> launches;  // logs with several launches (event files, step rewinds)
  std::vector<RedoneSteps> redone;
  std::optional<sched::ScheduleSpec> schedule;  // known when the journal recorded it
  std::vector<std::string> warnings;
};

// Each returns corrupt("<file>[:line]: <what is wrong>") for malformed input or input without a
// single (step, lr) point, and not_found / io_error when the file cannot be opened.
Result<LrSeries> lr_from_csv_text(const std::string& text, const std::string& path);
Result<LrSeries> lr_from_jsonl_text(const std::string& text, const std::string& path);
Result<LrSeries> lr_from_trainer_state_text(const std::string& text, const std::string& path);
// RUN_DIR/journal.jsonl: points from "progress" events; a restart is every process start after
// the first, placed at the first step that process took; the schedule from the last "start".
// Without a journal, one point per committed checkpoint (checkpoint_lr.h).
Result<LrSeries> lr_from_run(Env* env, const std::string& run_dir);

// Every LR series of a log (one per LR tag: per optimizer, per param group), in the order of
// lr_log.h's lr_tag_order; only the series named `tag` when it is not empty.
//
// `format` is "auto", "run", "csv", "jsonl", "trainer_state", "tensorboard" or "mlflow". Under
// "auto" the kind comes from the content: a directory is our run (journal.jsonl), a Hugging Face
// folder (trainer_state.json), an MLflow run (metrics/ beside meta.yaml), a Lightning log folder
// (metrics.csv) or else a tree of TensorBoard event files; a file is an event file when it starts
// with a valid TFRecord header, trainer_state when it is JSON holding "log_history", JSONL when
// its first line is a JSON object, an MLflow metric file when its lines are "timestamp value
// step", CSV otherwise. Inputs are capped (lr_log.h). On failure: invalid_argument for an unknown
// format or a `tag` the log does not have (the message lists those it has), corrupt for malformed
// input or input without an LR series, not_found / io_error when the input cannot be opened.
Result<std::vector<LrSeries>> load_lr_log(Env* env, const std::string& path,
                                          const std::string& format, const std::string& tag);
// The first series of load_lr_log(env, path, format, "").
Result<LrSeries> load_lr_series(Env* env, const std::string& path, const std::string& format);

}  // namespace ckpt::analytics
