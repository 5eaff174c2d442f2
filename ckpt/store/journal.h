// The run journal RUN/journal.jsonl (docs/format.md §6): one JSON object per line, appended.
// `ckpt lr` and `ckpt coverage` read it. start/save/restore events are fsynced (they are what a
// post-mortem needs); progress events are only flushed, so logging every step stays cheap.
// Not thread-safe: one writer per run (rank 0).
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ckpt/base/status.h"
#include "ckpt/io/env.h"

namespace ckpt::store {

// The journal's event types; their names ("start", "save", "restore", "progress") are the
// "event" field of each line, read by analytics/input/run_journal.
enum class JournalEventType { kStart, kSave, kRestore, kProgress };
const char* journal_event_name(JournalEventType t);
// nullopt for a name this version does not know (a newer writer's event: skip it, don't fail).
std::optional<JournalEventType> journal_event_from_name(std::string_view name);

class Journal {
 public:
  // Opens (creating) RUN/journal.jsonl for appending.
  static Result<std::unique_ptr<Journal>> open(Env* env, const std::string& run_dir);

  // Appends `event` with "event": the type's name and "time" (seconds since the epoch,
  // fractional) added.
  Status append(JournalEventType type, nlohmann::json event, bool durable);

 private:
  Journal(std::unique_ptr<WritableFile> f) : file_(std::move(f)) {}
  std::unique_ptr<WritableFile> file_;
};

// Every well-formed line of a journal; malformed lines (a torn last line after a crash) are
// skipped and counted.
Result<std::vector<nlohmann::json>> read_journal(Env* env, const std::string& run_dir,
                                                 size_t* skipped = nullptr);

}  // namespace ckpt::store
