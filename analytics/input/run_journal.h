// The run journal RUN/journal.jsonl as typed events: what `ckpt lr` and `ckpt coverage` read for
// runs our training library wrote. One JSON object per line, append-only; events are "start"
// (one per process start, with the sampler and the LR schedule spec), "restore" (what a resume
// restored and what was missing, with the loader cursor or null), "save" and "progress" (one per
// step: the step being taken, its LR, and the loader cursor it starts from). Unknown events and
// unknown keys are ignored so the journal can grow; a torn last line (a crash mid-append) is
// skipped with a warning, a malformed line elsewhere is an error.
//
// The reader owns nothing but the returned values; thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ckpt/base/status.h"
#include "ckpt/io/env.h"
#include "ckpt/loader/resumable_sampler.h"
#include "ckpt/sched/schedule.h"
#include "ckpt/store/journal.h"

namespace ckpt::analytics {

struct JournalSampler {
  std::string kind = "ckpt";  // the order algorithm family; "ckpt" = loader::EpochPermutation
  loader::SamplerSpec spec;
};

struct JournalEvent {
  store::JournalEventType kind = store::JournalEventType::kProgress;
  int64_t line = 0;  // 1-based line in journal.jsonl, for messages
  int64_t step = 0;

  // start
  bool fresh = true;
  std::optional<JournalSampler> sampler;
  int64_t grad_accum = 1;
  std::optional<sched::ScheduleSpec> schedule;

  // restore / save
  std::string checkpoint;
  std::vector<std::string> restored;                    // restore: components restored
  std::vector<std::string> missing;                     // restore: components the checkpoint lacked
  std::optional<loader::LoaderCursor> restored_cursor;  // restore: null loader = nullopt

  // progress
  std::optional<double> lr;
  std::optional<loader::LoaderCursor> cursor;  // where this step's samples start
};

struct RunJournal {
  std::string path;
  std::vector<JournalEvent> events;   // in file order
  std::vector<std::string> warnings;  // e.g. a torn last line
};

// Reads RUN_DIR/journal.jsonl through `env`. On failure: not_found / io_error when it cannot be
// opened, corrupt naming the file, line and problem (e.g. `journal.jsonl:12: "progress" without
// "step"`), or the schedule validation message when a start event carries an invalid scheduler
// spec.
Result<RunJournal> read_journal(Env* env, const std::string& run_dir);

// The same from text (tests, fuzzing); `path` only names the source in messages.
Result<RunJournal> parse_journal(const std::string& text, const std::string& path);

}  // namespace ckpt::analytics
