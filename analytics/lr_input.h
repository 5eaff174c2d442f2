// Learning-rate series for `ckpt lr`: LR against step, read from any of the places a run leaves it
// — our run journal (with the restart steps and the schedule spec it records), a CSV log with a
// header naming `step` and `lr` or `learning_rate`, a JSONL log with the same keys, or Hugging
// Face's trainer_state.json (`log_history`). Every loader returns points sorted by step with one
// point per step: when a step appears more than once (a crash redid it after the restore) the
// LAST occurrence wins, because that is the LR the surviving run used.
//
// Loaders own nothing beyond their return values; thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ckpt/base/status.h"
#include "ckpt/sched/schedule.h"

namespace ckpt::analytics {

struct LrPoint {
  int64_t step = 0;
  double lr = 0;
};

struct LrSeries {
  std::string source;             // the file or run directory read
  std::string format;             // "run", "csv", "jsonl" or "trainer_state"
  std::vector<LrPoint> points;    // ascending steps, unique
  std::vector<int64_t> restarts;  // known restart steps, ascending (run journals only)
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
Result<LrSeries> lr_from_run(const std::string& run_dir);

// Picks the reader: `format` is "auto", "run", "csv", "jsonl" or "trainer_state". Under "auto" a
// directory is a run (or a Hugging Face checkpoint folder holding trainer_state.json), *.jsonl /
// *.ndjson is JSONL, a .json file holding `log_history` is trainer_state, anything else CSV.
// An unknown format is invalid_argument.
Result<LrSeries> load_lr_series(const std::string& path, const std::string& format);

}  // namespace ckpt::analytics
