#include "ckpt/store/journal.h"

#include <chrono>
#include <sstream>

namespace ckpt::store {

Result<std::unique_ptr<Journal>> Journal::open(Env* env, const std::string& run_dir) {
  CKPT_RETURN_IF_ERROR(env->make_dirs(run_dir));
  const std::string path = path_join(run_dir, "journal.jsonl");
  // On a store there is no directory entry to sync (and no HEAD to spend finding out).
  const bool created = env->object_store(path) == nullptr && !env->exists(path);
  CKPT_ASSIGN_OR_RETURN(auto f, env->open_append(path));
  // A durable event in a file whose directory entry is not durable is not durable.
  if (created) CKPT_RETURN_IF_ERROR(env->sync_dir(run_dir));
  return std::unique_ptr<Journal>(new Journal(std::move(f)));
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
  using namespace std::chrono;
  nlohmann::json line = {
      {"event", journal_event_name(type)},
      {"time", duration<double>(system_clock::now().time_since_epoch()).count()}};
  for (auto it = event.begin(); it != event.end(); ++it) line[it.key()] = it.value();
  // Bytes from outside (a damaged LATEST, a path, an environment variable) may be any bytes: an
  // invalid UTF-8 sequence becomes U+FFFD instead of an exception.
  const std::string text =
      line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  CKPT_RETURN_IF_ERROR(file_->append(text.data(), text.size()));
  if (durable) CKPT_RETURN_IF_ERROR(file_->sync());
  return Status::ok();
}

Result<std::vector<nlohmann::json>> read_journal(Env* env, const std::string& run_dir,
                                                 size_t* skipped) {
  CKPT_ASSIGN_OR_RETURN(std::string text,
                        env->read_all(path_join(run_dir, "journal.jsonl"), 4ull << 30));
  std::vector<nlohmann::json> out;
  size_t bad = 0;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    auto j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.is_object() || !j.contains("event")) {
      ++bad;
      continue;
    }
    out.push_back(std::move(j));
  }
  if (skipped != nullptr) *skipped = bad;
  return out;
}

}  // namespace ckpt::store
