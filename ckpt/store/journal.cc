#include "ckpt/store/journal.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <sstream>

namespace ckpt::store {

namespace {

constexpr const char* kSegmentEvent = "journal_segment";
// A journal written before segments, or by a long run on a disk copied to a store, may be larger
// than a segment: it is read whole once and becomes the first segment.
constexpr uint64_t kMaxTailBytes = 256ull << 20;

std::string tail_path(const std::string& run_dir) { return path_join(run_dir, "journal.jsonl"); }

}  // namespace

// Any bytes (a reader's input is untrusted): a first line that is long, not JSON, or not the
// marker means none.
uint64_t journal_segments_before(const std::string& tail) {
  const size_t end = tail.find('\n');
  if (end == std::string::npos || end > 4096) return 0;
  const auto j = nlohmann::json::parse(tail.substr(0, end), nullptr, false);
  if (j.is_discarded() || !j.is_object()) return 0;
  const auto e = j.find("event");
  if (e == j.end() || !e->is_string() || *e != kSegmentEvent) return 0;
  const auto k = j.find("index");
  return k != j.end() && k->is_number_unsigned() ? k->get<uint64_t>() : 0;
}

namespace {

std::string line_of(const nlohmann::json& line) {
  // Bytes from outside (a damaged LATEST, a path, an environment variable) may be any bytes: an
  // invalid UTF-8 sequence becomes U+FFFD instead of an exception.
  return line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

double now_seconds() {
  using namespace std::chrono;
  return duration<double>(system_clock::now().time_since_epoch()).count();
}

}  // namespace

std::string journal_segment_name(uint64_t k) {
  char name[40];
  std::snprintf(name, sizeof name, "journal.%06llu.jsonl", static_cast<unsigned long long>(k));
  return name;
}

std::vector<std::string> journal_segment_paths(const std::string& run_dir,
                                               const std::string& tail) {
  std::vector<std::string> out;
  const uint64_t segments = journal_segments_before(tail);
  for (uint64_t k = 1; k <= segments; ++k) {
    out.push_back(path_join(run_dir, journal_segment_name(k)));
  }
  return out;
}

Result<std::unique_ptr<Journal>> Journal::open(Env* env, const std::string& run_dir) {
  const std::string path = tail_path(run_dir);
  if (env->object_store(path) != nullptr) {
    return open_segmented(env, run_dir, kJournalSegmentBytes);
  }
  CKPT_RETURN_IF_ERROR(env->make_dirs(run_dir));
  const bool created = !env->exists(path);
  CKPT_ASSIGN_OR_RETURN(auto f, env->open_append(path));
  // A durable event in a file whose directory entry is not durable is not durable.
  if (created) CKPT_RETURN_IF_ERROR(env->sync_dir(run_dir));
  return std::unique_ptr<Journal>(new Journal(std::move(f)));
}

// One GET of the tail (no HEAD, no LIST). A tail at its limit was being rolled over when its
// writer stopped (roll_over writes the segment first): rolling it over again writes the same
// bytes to the same segment, so the journal reads the same either way.
Result<std::unique_ptr<Journal>> Journal::open_segmented(Env* env, const std::string& run_dir,
                                                         uint64_t segment_bytes) {
  CKPT_RETURN_IF_ERROR(env->make_dirs(run_dir));
  std::unique_ptr<Journal> j(new Journal(env, run_dir, std::max<uint64_t>(segment_bytes, 1)));
  auto text = env->read_all(tail_path(run_dir), kMaxTailBytes);
  if (text.is_ok()) {
    j->tail_ = std::move(*text);
  } else if (text.status().code() != Code::kNotFound) {
    return text.status();
  }
  j->index_ = journal_segments_before(j->tail_);
  if (j->tail_.size() >= j->segment_bytes_) CKPT_RETURN_IF_ERROR(j->roll_over());
  return j;
}

Journal::~Journal() {
  if (env_ != nullptr && dirty_) (void)write_tail();
}

Status Journal::write_tail() {
  CKPT_RETURN_IF_ERROR(env_->write_atomic(tail_path(run_dir_), tail_));
  dirty_ = false;
  return Status::ok();
}

Status Journal::roll_over() {
  CKPT_RETURN_IF_ERROR(
      env_->write_atomic(path_join(run_dir_, journal_segment_name(index_ + 1)), tail_));
  ++index_;
  tail_ = line_of({{"event", kSegmentEvent}, {"index", index_}, {"time", now_seconds()}});
  return write_tail();
}

const char* journal_event_name(JournalEventType t) {
  switch (t) {
    case JournalEventType::kStart:
      return "start";
    case JournalEventType::kSave:
      return "save";
    case JournalEventType::kRestore:
      return "restore";
    case JournalEventType::kProgress:
      return "progress";
  }
  return "?";
}

std::optional<JournalEventType> journal_event_from_name(std::string_view name) {
  for (JournalEventType t : {JournalEventType::kStart, JournalEventType::kSave,
                             JournalEventType::kRestore, JournalEventType::kProgress}) {
    if (name == journal_event_name(t)) return t;
  }
  return std::nullopt;
}

Status Journal::append(JournalEventType type, nlohmann::json event, bool durable) {
  nlohmann::json line = {{"event", journal_event_name(type)}, {"time", now_seconds()}};
  for (auto it = event.begin(); it != event.end(); ++it) line[it.key()] = it.value();
  const std::string text = line_of(line);
  if (env_ == nullptr) {
    CKPT_RETURN_IF_ERROR(file_->append(text.data(), text.size()));
    if (durable) CKPT_RETURN_IF_ERROR(file_->sync());
    return Status::ok();
  }
  tail_ += text;
  dirty_ = true;
  if (tail_.size() >= segment_bytes_) return roll_over();  // the event is written either way
  return durable ? write_tail() : Status::ok();
}

namespace {

void parse_lines(const std::string& text, std::vector<nlohmann::json>* out, size_t* bad) {
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    auto j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.is_object() || !j.contains("event")) {
      ++*bad;
      continue;
    }
    if (j["event"] == kSegmentEvent) continue;
    out->push_back(std::move(j));
  }
}

}  // namespace

// The tail first (one read): its marker says which segments precede it.
Result<std::vector<nlohmann::json>> read_journal(Env* env, const std::string& run_dir,
                                                 size_t* skipped) {
  constexpr uint64_t kMaxBytes = 4ull << 30;
  CKPT_ASSIGN_OR_RETURN(std::string tail, env->read_all(tail_path(run_dir), kMaxBytes));
  std::vector<nlohmann::json> out;
  size_t bad = 0;
  const std::vector<std::string> segments = journal_segment_paths(run_dir, tail);
  for (size_t k = 0; k < segments.size(); ++k) {
    auto text = env->read_all(segments[k], kMaxBytes);
    if (!text.is_ok()) {  // the message names the object
      return Status(text.status().code(), text.status().message() + " (segment " +
                                              std::to_string(k + 1) + " of " +
                                              std::to_string(segments.size()) + " of the journal)");
    }
    parse_lines(*text, &out, &bad);
  }
  parse_lines(tail, &out, &bad);
  if (skipped != nullptr) *skipped = bad;
  return out;
}

}  // namespace ckpt::store
