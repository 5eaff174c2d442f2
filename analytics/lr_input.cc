#include "analytics/lr_input.h"

#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <map>
#include <nlohmann/json.hpp>

#include "analytics/checkpoint_lr.h"
#include "analytics/json_text.h"
#include "analytics/run_journal.h"

namespace ckpt::analytics {
namespace {

using nlohmann::json;

// Collapses repeated steps (last occurrence wins) and sorts.
void finish_points(const std::vector<LrPoint>& raw, LrSeries* out) {
  std::map<int64_t, double> by_step;
  for (const auto& p : raw) by_step[p.step] = p.lr;
  out->points.clear();
  out->points.reserve(by_step.size());
  for (const auto& [step, lr] : by_step) out->points.push_back({step, lr});
}

Status need_points(const LrSeries& s) {
  if (s.points.empty()) {
    return corrupt(s.source + ": no learning-rate points (no entry with both a step and an LR)");
  }
  return Status::ok();
}

// Splits one CSV record, honouring double quotes ("" inside quotes is a quote).
std::vector<std::string> split_csv(const std::string& line) {
  std::vector<std::string> cells;
  std::string cell;
  bool quoted = false;
  for (size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (quoted) {
      if (c == '"' && i + 1 < line.size() && line[i + 1] == '"') {
        cell.push_back('"');
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        cell.push_back(c);
      }
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      cells.push_back(cell);
      cell.clear();
    } else if (c != '\r') {
      cell.push_back(c);
    }
  }
  cells.push_back(cell);
  for (auto& c : cells) {
    const size_t a = c.find_first_not_of(" \t");
    const size_t b = c.find_last_not_of(" \t");
    c = a == std::string::npos ? std::string() : c.substr(a, b - a + 1);
  }
  return cells;
}

bool parse_double(const std::string& s, double* out) {
  if (s.empty()) return false;
  char* end = nullptr;
  *out = std::strtod(s.c_str(), &end);
  return end == s.c_str() + s.size();
}

// Steps are integers, but loggers write them as floats too ("100.0").
bool parse_step(const std::string& s, int64_t* out) {
  double d = 0;
  if (!parse_double(s, &d) || !(d >= 0) || d > 9.0e18 || std::floor(d) != d) return false;
  *out = static_cast<int64_t>(d);
  return true;
}

const char* lr_key_in(const json& obj) {
  if (obj.contains("lr")) return "lr";
  if (obj.contains("learning_rate")) return "learning_rate";
  return nullptr;
}

bool is_dir(const std::string& p) {
  struct stat st;
  return ::stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

Result<LrSeries> lr_from_csv_text(const std::string& text, const std::string& path) {
  LrSeries out;
  out.source = path;
  out.format = "csv";
  std::vector<LrPoint> raw;
  int step_col = -1, lr_col = -1;
  size_t header_cells = 0;
  size_t begin = 0;
  int64_t line_no = 0;
  while (begin < text.size()) {
    size_t end = text.find('\n', begin);
    if (end == std::string::npos) end = text.size();
    const std::string line = text.substr(begin, end - begin);
    begin = end + 1;
    ++line_no;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const auto cells = split_csv(line);
    const std::string where = path + ":" + std::to_string(line_no);
    if (step_col < 0) {
      for (size_t i = 0; i < cells.size(); ++i) {
        if (cells[i] == "step") step_col = static_cast<int>(i);
        if (cells[i] == "lr" || (cells[i] == "learning_rate" && lr_col < 0)) {
          lr_col = static_cast<int>(i);
        }
      }
      if (step_col < 0 || lr_col < 0) {
        return corrupt(where +
                       ": CSV header must name a \"step\" column and an \"lr\" or "
                       "\"learning_rate\" column, got \"" +
                       line + "\"");
      }
      header_cells = cells.size();
      continue;
    }
    if (cells.size() != header_cells) {
      return corrupt(where + ": expected " + std::to_string(header_cells) +
                     " cells as in the header, got " + std::to_string(cells.size()));
    }
    const std::string& lr_cell = cells[static_cast<size_t>(lr_col)];
    const std::string& step_cell = cells[static_cast<size_t>(step_col)];
    // Loggers such as Lightning's CSVLogger leave the LR cell empty on rows that log other
    // metrics (validation); those rows carry no LR and are not errors.
    if (lr_cell.empty()) continue;
    LrPoint p;
    if (!parse_step(step_cell, &p.step)) {
      return corrupt(where + ": step must be a non-negative integer, got \"" + step_cell + "\"");
    }
    if (!parse_double(lr_cell, &p.lr) || !std::isfinite(p.lr)) {
      return corrupt(where + ": learning rate must be a finite number, got \"" + lr_cell + "\"");
    }
    raw.push_back(p);
  }
  if (step_col < 0) return corrupt(path + ": empty CSV (no header)");
  finish_points(raw, &out);
  CKPT_RETURN_IF_ERROR(need_points(out));
  return out;
}

Result<LrSeries> lr_from_jsonl_text(const std::string& text, const std::string& path) {
  LrSeries out;
  out.source = path;
  out.format = "jsonl";
  std::vector<LrPoint> raw;
  size_t begin = 0;
  int64_t line_no = 0;
  while (begin < text.size()) {
    size_t end = text.find('\n', begin);
    if (end == std::string::npos) end = text.size();
    const std::string line = text.substr(begin, end - begin);
    begin = end + 1;
    ++line_no;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = path + ":" + std::to_string(line_no);
    CKPT_ASSIGN_OR_RETURN(json obj, parse_python_json(line, where));
    if (!obj.is_object()) return corrupt(where + ": expected a JSON object per line");
    const char* key = lr_key_in(obj);
    if (key == nullptr || !obj.contains("step") || obj[key].is_null()) continue;
    LrPoint p;
    if (!json_count(obj["step"], &p.step)) {
      return corrupt(where + ": \"step\" must be a non-negative integer, got " +
                     obj["step"].dump());
    }
    if (!json_number(obj[key], &p.lr)) {
      return corrupt(where + ": \"" + key + "\" must be a number, got " + obj[key].dump());
    }
    raw.push_back(p);
  }
  finish_points(raw, &out);
  CKPT_RETURN_IF_ERROR(need_points(out));
  return out;
}

Result<LrSeries> lr_from_trainer_state_text(const std::string& text, const std::string& path) {
  LrSeries out;
  out.source = path;
  out.format = "trainer_state";
  CKPT_ASSIGN_OR_RETURN(json doc, parse_python_json(text, path));
  if (!doc.is_object() || !doc.contains("log_history") || !doc["log_history"].is_array()) {
    return corrupt(path + ": not a trainer_state.json (no \"log_history\" list)");
  }
  std::vector<LrPoint> raw;
  size_t index = 0;
  for (const auto& entry : doc["log_history"]) {
    const std::string where = path + ": log_history[" + std::to_string(index++) + "]";
    // Evaluation and final-summary entries have no learning_rate; only training logs count.
    if (!entry.is_object() || !entry.contains("learning_rate")) continue;
    const json& lr = entry["learning_rate"];
    if (lr.is_null()) {
      out.warnings.push_back(where + ": learning_rate is NaN or null; skipped");
      continue;
    }
    LrPoint p;
    if (!entry.contains("step") || !json_count(entry["step"], &p.step)) {
      return corrupt(where + ": \"step\" missing or not a non-negative integer");
    }
    if (!json_number(lr, &p.lr)) return corrupt(where + ": learning_rate must be a number");
    raw.push_back(p);
  }
  finish_points(raw, &out);
  CKPT_RETURN_IF_ERROR(need_points(out));
  return out;
}

Result<LrSeries> lr_from_run(const std::string& run_dir) {
  auto read = read_journal(run_dir);
  if (!read.is_ok() && read.status().code() == Code::kNotFound) {
    // No journal: the checkpoints' scheduler components still give one point each.
    auto from_checkpoints = lr_from_checkpoints(run_dir);
    if (from_checkpoints.is_ok()) return from_checkpoints;
    return read.status();
  }
  CKPT_ASSIGN_OR_RETURN(RunJournal journal, std::move(read));
  LrSeries out;
  out.source = run_dir;
  out.format = "run";
  out.warnings = journal.warnings;
  std::vector<LrPoint> raw;
  int starts = 0;
  bool restart_pending = false;
  for (const auto& e : journal.events) {
    if (e.kind == store::JournalEventType::kStart) {
      if (starts++ > 0) restart_pending = true;
      if (e.schedule) out.schedule = e.schedule;
    } else if (e.kind == store::JournalEventType::kProgress && e.lr) {
      if (restart_pending) {
        out.restarts.push_back(e.step);
        restart_pending = false;
      }
      raw.push_back({e.step, *e.lr});
    }
  }
  std::sort(out.restarts.begin(), out.restarts.end());
  out.restarts.erase(std::unique(out.restarts.begin(), out.restarts.end()), out.restarts.end());
  finish_points(raw, &out);
  if (out.points.empty()) {
    return corrupt(journal.path + ": no \"progress\" events with an \"lr\"");
  }
  return out;
}

Result<LrSeries> load_lr_series(const std::string& path, const std::string& format) {
  std::string fmt = format;
  if (fmt == "auto") {
    if (is_dir(path)) {
      struct stat st;
      const bool hf = ::stat((path + "/trainer_state.json").c_str(), &st) == 0 &&
                      ::stat((path + "/journal.jsonl").c_str(), &st) != 0;
      if (hf) return load_lr_series(path + "/trainer_state.json", "trainer_state");
      fmt = "run";
    } else if (ends_with(path, ".jsonl") || ends_with(path, ".ndjson")) {
      fmt = "jsonl";
    } else if (ends_with(path, ".json")) {
      fmt = "trainer_state";
    } else {
      fmt = "csv";
    }
  }
  if (fmt == "run") return lr_from_run(path);
  if (fmt != "csv" && fmt != "jsonl" && fmt != "trainer_state") {
    return invalid_argument("unknown log format \"" + format +
                            "\" (expected auto, run, csv, jsonl or trainer_state)");
  }
  CKPT_ASSIGN_OR_RETURN(std::string text, read_text_file(path));
  if (fmt == "csv") return lr_from_csv_text(text, path);
  if (fmt == "jsonl") return lr_from_jsonl_text(text, path);
  return lr_from_trainer_state_text(text, path);
}

}  // namespace ckpt::analytics
