#include "analytics/input/run_journal.h"

#include <nlohmann/json.hpp>

#include "analytics/input/json_text.h"
#include "ckpt/base/text.h"
#include "ckpt/format/tree.h"
#include "ckpt/sched/scheduler.h"

namespace ckpt::analytics {
namespace {

using nlohmann::json;

Status bad(const std::string& where, const std::string& what) {
  return corrupt(where + ": " + what);
}

Result<int64_t> count_field(const json& obj, const char* key, const std::string& where) {
  auto it = obj.find(key);
  if (it == obj.end()) return bad(where, std::string("missing \"") + key + "\"");
  int64_t v = 0;
  if (!json_count(*it, &v)) {
    return bad(where,
               std::string("\"") + key + "\" must be a non-negative integer, got " + it->dump());
  }
  return v;
}

bool bool_field(const json& obj, const char* key, bool fallback) {
  auto it = obj.find(key);
  return (it != obj.end() && it->is_boolean()) ? it->get<bool>() : fallback;
}

Result<loader::LoaderCursor> cursor_from(const json& obj, const std::string& where) {
  CKPT_ASSIGN_OR_RETURN(int64_t epoch, count_field(obj, "epoch", where));
  CKPT_ASSIGN_OR_RETURN(int64_t position, count_field(obj, "position", where));
  return loader::LoaderCursor{static_cast<uint64_t>(epoch), static_cast<uint64_t>(position)};
}

Result<JournalSampler> sampler_from(const json& obj, const std::string& where) {
  if (!obj.is_object()) return bad(where, "\"sampler\" must be an object");
  JournalSampler s;
  auto kind = obj.find("kind");
  if (kind != obj.end() && kind->is_string()) s.kind = kind->get<std::string>();
  CKPT_ASSIGN_OR_RETURN(int64_t n, count_field(obj, "dataset_size", where + ": sampler"));
  CKPT_ASSIGN_OR_RETURN(int64_t w, count_field(obj, "world_size", where + ": sampler"));
  CKPT_ASSIGN_OR_RETURN(int64_t b, count_field(obj, "batch_size", where + ": sampler"));
  int64_t seed = 0;
  if (obj.contains("seed") && !json_count(obj["seed"], &seed)) {
    return bad(where, "sampler \"seed\" must be a non-negative integer");
  }
  if (n == 0 || w == 0 || b == 0 || w > UINT32_MAX || b > UINT32_MAX) {
    return bad(where, "sampler needs dataset_size, world_size and batch_size >= 1");
  }
  s.spec.dataset_size = static_cast<uint64_t>(n);
  s.spec.world_size = static_cast<uint32_t>(w);
  s.spec.batch_size = static_cast<uint32_t>(b);
  s.spec.seed = static_cast<uint64_t>(seed);
  s.spec.shuffle = bool_field(obj, "shuffle", true);
  s.spec.drop_last = bool_field(obj, "drop_last", false);
  auto fp = obj.find("dataset_fingerprint");
  if (fp != obj.end() && fp->is_string()) s.spec.dataset_fingerprint = fp->get<std::string>();
  return s;
}

// The journal stores the scheduler spec with the same attribute names as the checkpoint's
// scheduler node, so it goes through the same validated decoder.
Result<sched::ScheduleSpec> schedule_from(const json& obj, const std::string& where) {
  if (!obj.is_object()) return bad(where, "\"scheduler\" must be an object");
  Node node;
  for (auto it = obj.begin(); it != obj.end(); ++it) {
    const json& v = it.value();
    if (v.is_boolean()) {
      node.attrs[it.key()] = v.get<bool>();
    } else if (v.is_number_integer()) {
      node.attrs[it.key()] = v.get<int64_t>();
    } else if (v.is_number_float()) {
      node.attrs[it.key()] = v.get<double>();
    } else if (v.is_string()) {
      node.attrs[it.key()] = v.get<std::string>();
    } else if (v.is_array()) {
      bool all_int = true;
      for (const auto& e : v) {
        if (!e.is_number()) return bad(where, "scheduler \"" + it.key() + "\" must hold numbers");
        all_int = all_int && e.is_number_integer();
      }
      if (all_int) {
        node.attrs[it.key()] = v.get<std::vector<int64_t>>();
      } else {
        node.attrs[it.key()] = v.get<std::vector<double>>();
      }
    }
  }
  auto spec = sched::spec_from_node(node);
  if (!spec.is_ok()) return bad(where, "scheduler: " + spec.status().message());
  return std::move(spec).value();
}

std::vector<std::string> strings_of(const json& obj, const char* key) {
  std::vector<std::string> out;
  auto it = obj.find(key);
  if (it == obj.end() || !it->is_array()) return out;
  for (const auto& e : *it) {
    if (e.is_string()) out.push_back(e.get<std::string>());
  }
  return out;
}

Result<std::optional<JournalEvent>> parse_event(const json& obj, const std::string& where) {
  if (!obj.is_object()) return bad(where, "expected a JSON object per line");
  auto ev = obj.find("event");
  if (ev == obj.end() || !ev->is_string()) return bad(where, "missing \"event\"");
  const std::string name = ev->get<std::string>();
  const std::optional<store::JournalEventType> type = store::journal_event_from_name(name);
  if (!type) return std::optional<JournalEvent>();  // a newer event type: not ours to judge
  JournalEvent e;
  e.kind = *type;
  CKPT_ASSIGN_OR_RETURN(e.step, count_field(obj, "step", where + ": \"" + name + "\""));
  switch (e.kind) {
    case store::JournalEventType::kStart: {
      e.fresh = bool_field(obj, "fresh", true);
      if (obj.contains("sampler") && !obj["sampler"].is_null()) {
        CKPT_ASSIGN_OR_RETURN(e.sampler, sampler_from(obj["sampler"], where));
      }
      if (obj.contains("grad_accum")) {
        CKPT_ASSIGN_OR_RETURN(e.grad_accum, count_field(obj, "grad_accum", where));
        if (e.grad_accum == 0) return bad(where, "\"grad_accum\" must be >= 1");
      }
      if (obj.contains("scheduler") && !obj["scheduler"].is_null()) {
        CKPT_ASSIGN_OR_RETURN(e.schedule, schedule_from(obj["scheduler"], where));
      }
      break;
    }
    case store::JournalEventType::kRestore: {
      if (obj.contains("checkpoint") && obj["checkpoint"].is_string()) {
        e.checkpoint = obj["checkpoint"].get<std::string>();
      }
      e.restored = strings_of(obj, "restored");
      e.missing = strings_of(obj, "missing");
      if (obj.contains("loader") && !obj["loader"].is_null()) {
        CKPT_ASSIGN_OR_RETURN(e.restored_cursor, cursor_from(obj["loader"], where + ": loader"));
      }
      break;
    }
    case store::JournalEventType::kSave:
      if (obj.contains("checkpoint") && obj["checkpoint"].is_string()) {
        e.checkpoint = obj["checkpoint"].get<std::string>();
      }
      break;
    case store::JournalEventType::kProgress: {
      double lr = 0;
      if (obj.contains("lr") && json_number(obj["lr"], &lr)) e.lr = lr;
      if (obj.contains("epoch") && obj.contains("position")) {
        CKPT_ASSIGN_OR_RETURN(e.cursor, cursor_from(obj, where));
      }
      break;
    }
  }
  return std::optional<JournalEvent>(std::move(e));
}

}  // namespace

Result<RunJournal> parse_journal(const std::string& text, const std::string& path) {
  RunJournal out;
  out.path = path;
  LineCursor lines(text);
  for (std::string_view line; lines.next(&line);) {
    const int64_t line_no = lines.number();
    if (is_blank(line)) continue;
    const std::string where = path + ":" + std::to_string(line_no);
    auto doc = parse_python_json(line, where);
    if (!doc.is_ok()) {
      // A crash can tear the line being appended; only the unterminated last line may be torn.
      if (!lines.terminated()) {
        out.warnings.push_back(where + ": skipped a torn last line (no newline, not JSON)");
        break;
      }
      return doc.status();
    }
    CKPT_ASSIGN_OR_RETURN(auto event, parse_event(*doc, where));
    if (event) {
      event->line = line_no;
      out.events.push_back(std::move(*event));
    }
  }
  return out;
}

// On a store the journal may be in segments (ckpt/store/journal.h): those its first line counts,
// in order, then journal.jsonl itself; each names its own lines in messages.
Result<RunJournal> read_journal(Env* env, const std::string& run_dir) {
  const std::string path = run_dir + "/journal.jsonl";
  CKPT_ASSIGN_OR_RETURN(std::string text, read_text_file(env, path));
  const std::vector<std::string> segments = store::journal_segment_paths(run_dir, text);
  if (segments.empty()) return parse_journal(text, path);
  RunJournal out;
  out.path = path;
  auto add = [&out](const std::string& part_text, const std::string& part_path) -> Status {
    CKPT_ASSIGN_OR_RETURN(RunJournal part, parse_journal(part_text, part_path));
    for (auto& e : part.events) out.events.push_back(std::move(e));
    for (auto& w : part.warnings) out.warnings.push_back(std::move(w));
    return Status::ok();
  };
  for (const std::string& segment : segments) {
    CKPT_ASSIGN_OR_RETURN(std::string seg_text, read_text_file(env, segment));
    CKPT_RETURN_IF_ERROR(add(seg_text, segment));
  }
  CKPT_RETURN_IF_ERROR(add(text, path));
  return out;
}

}  // namespace ckpt::analytics
