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

// On an object store an object cannot be appended to: each durable event writes the object
// again. So that a long run's saves do not upload the whole journal every time, a store's journal
// is kept in segments (docs/format.md §6): RUN/journal.jsonl holds the newest events; when it
// reaches kJournalSegmentBytes it is copied whole to RUN/journal.<k>.jsonl (k = 000001, …) and
// starts again with a line {"event": "journal_segment", "index": k} saying how many segments
// precede it. A local journal is one file, appended to.
constexpr uint64_t kJournalSegmentBytes = 8u << 20;

class Journal {
 public:
  // Opens (creating) RUN/journal.jsonl for appending; on an object store, segmented.
  static Result<std::unique_ptr<Journal>> open(Env* env, const std::string& run_dir);
  // The store's way on any Env, with segments of `segment_bytes` (tests; a local disk appends).
  static Result<std::unique_ptr<Journal>> open_segmented(Env* env, const std::string& run_dir,
                                                         uint64_t segment_bytes);
  // Segmented: events not yet written (non-durable ones) are written now, as a file's appends
  // reach the page cache; an error is dropped.
  ~Journal();
  Journal(const Journal&) = delete;
  Journal& operator=(const Journal&) = delete;

  // Appends `event` with "event": the type's name and "time" (seconds since the epoch,
  // fractional) added.
  Status append(JournalEventType type, nlohmann::json event, bool durable);

 private:
  explicit Journal(std::unique_ptr<WritableFile> f) : file_(std::move(f)) {}
  Journal(Env* env, std::string run_dir, uint64_t segment_bytes)
      : env_(env), run_dir_(std::move(run_dir)), segment_bytes_(segment_bytes) {}
  Status roll_over();  // segmented: the tail becomes segment index_ + 1; a new tail begins
  Status write_tail();

  std::unique_ptr<WritableFile> file_;  // a local journal
  Env* env_ = nullptr;                  // segmented: the tail's bytes, written whole
  std::string run_dir_;
  uint64_t segment_bytes_ = 0;
  uint64_t index_ = 0;  // segments before the tail
  std::string tail_;
  bool dirty_ = false;
};

// RUN/journal.<k>.jsonl: the k-th segment of a segmented journal (k from 1).
std::string journal_segment_name(uint64_t k);
// How many segments precede a journal.jsonl of this text (its first line's marker; 0 without).
uint64_t journal_segments_before(const std::string& tail);
// The segments to read before a journal.jsonl of this text, in order: what its marker counts.
// A segment written after that marker (a roll-over cut short) holds nothing the tail does not.
std::vector<std::string> journal_segment_paths(const std::string& run_dir, const std::string& tail);

// Every well-formed line of a journal, its segments first; malformed lines (a torn last line
// after a crash) are skipped and counted. The segment markers are not events: left out.
Result<std::vector<nlohmann::json>> read_journal(Env* env, const std::string& run_dir,
                                                 size_t* skipped = nullptr);

}  // namespace ckpt::store
