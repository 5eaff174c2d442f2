#include "analytics/lr/lr_input.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <map>
#include <nlohmann/json.hpp>

#include "analytics/input/json_text.h"
#include "analytics/input/run_journal.h"
#include "analytics/lr/checkpoint_lr.h"
#include "analytics/lr/lr_foreign.h"
#include "analytics/lr/lr_log.h"
#include "analytics/lr/tb/tfrecord.h"
#include "ckpt/base/text.h"

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

const char* lr_key_in(const json& obj) {
  if (obj.contains("lr")) return "lr";
  if (obj.contains("learning_rate")) return "learning_rate";
  return nullptr;
}

}  // namespace

Result<LrSeries> lr_from_csv_text(const std::string& text, const std::string& path) {
  CKPT_ASSIGN_OR_RETURN(ScalarLog log, scalar_log_from_csv_text(text, path));
  auto series = lr_series_from_log(log, "");
  if (!series.is_ok()) {
    return corrupt(path + ": no learning-rate points (no row with both a step and an LR)");
  }
  return std::move(series->front());
}

Result<LrSeries> lr_from_jsonl_text(const std::string& text, const std::string& path) {
  LrSeries out;
  out.source = path;
  out.format = "jsonl";
  std::vector<LrPoint> raw;
  LineCursor lines(text);
  for (std::string_view line; lines.next(&line);) {
    if (is_blank(line)) continue;
    const std::string where = path + ":" + std::to_string(lines.number());
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

Result<LrSeries> lr_from_run(Env* env, const std::string& run_dir) {
  auto read = read_journal(env, run_dir);
  if (!read.is_ok() && read.status().code() == Code::kNotFound) {
    // No journal: the checkpoints' scheduler components still give one point each.
    auto from_checkpoints = lr_from_checkpoints(env, run_dir);
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

namespace {

// The format of a directory under "auto" (lr_input.h).
std::string directory_format(Env* env, const std::string& path) {
  if (env->exists(path + "/journal.jsonl")) return "run";
  if (env->exists(path + "/trainer_state.json")) return "trainer_state";
  if (env->is_dir(path + "/metrics") &&
      (env->exists(path + "/meta.yaml") || env->is_dir(path + "/params"))) {
    return "mlflow";
  }
  if (env->exists(path + "/metrics.csv")) return "csv";
  return "tensorboard";
}

// The format of a file's bytes under "auto" (lr_input.h).
std::string content_format(const std::string& text) {
  if (tb::looks_like_tfrecord(text)) return "tensorboard";
  const size_t first = text.find_first_not_of(" \t\r\n");
  if (first != std::string::npos && text[first] == '{') {
    return text.find("\"log_history\"") != std::string::npos ? "trainer_state" : "jsonl";
  }
  if (looks_like_mlflow_metric(text)) return "mlflow_metric";
  return "csv";
}

// The tag of a single-series log (journal, JSONL, trainer_state) checked against --tag.
Result<std::vector<LrSeries>> single(Result<LrSeries> s, const std::string& tag,
                                     const std::string& own_tag) {
  CKPT_ASSIGN_OR_RETURN(LrSeries series, std::move(s));
  if (series.tag.empty()) series.tag = own_tag;
  if (!tag.empty() && tag != series.tag) {
    return invalid_argument(series.source + ": no series tagged \"" + escape_bytes(tag, 80) +
                            "\" (this log has one learning-rate series, \"" + series.tag + "\")");
  }
  return std::vector<LrSeries>{std::move(series)};
}

std::string file_base_name(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

}  // namespace

Result<std::vector<LrSeries>> load_lr_log(Env* env, const std::string& path,
                                          const std::string& format, const std::string& tag) {
  static const char* const kFormats[] = {"auto",          "run",         "csv",   "jsonl",
                                         "trainer_state", "tensorboard", "mlflow"};
  if (std::find(std::begin(kFormats), std::end(kFormats), format) == std::end(kFormats)) {
    return invalid_argument("unknown log format \"" + escape_bytes(format, 40) +
                            "\" (expected auto, run, csv, jsonl, trainer_state, tensorboard or "
                            "mlflow)");
  }
  std::string fmt = format;
  const bool dir = env->is_dir(path);
  if (dir && fmt == "auto") fmt = directory_format(env, path);
  if (fmt == "run") return single(lr_from_run(env, path), tag, "lr");
  if (fmt == "tensorboard") {
    auto log = scalar_log_from_tensorboard(env, path);
    if (!log.is_ok() && log.status().code() == Code::kNotFound && format == "auto") {
      // Lightning's CSVLogger writes one version_N/metrics.csv per launch.
      auto versions = scalar_log_from_csv_versions(env, path);
      if (versions.is_ok()) return lr_series_from_log(*versions, tag);
      if (versions.status().code() != Code::kNotFound) return versions.status();
      // A folder with none of the known logs: our run's checkpoints may still give points.
      auto run = lr_from_run(env, path);
      if (!run.is_ok() && run.status().code() == Code::kNotFound) {
        return not_found(path +
                         ": no log found here (no journal.jsonl, trainer_state.json, MLflow "
                         "metrics/, metrics.csv or TensorBoard event file)");
      }
      return single(std::move(run), tag, "lr");
    }
    CKPT_RETURN_IF_ERROR(log.status());
    return lr_series_from_log(*log, tag);
  }
  if (dir && fmt == "mlflow") {
    CKPT_ASSIGN_OR_RETURN(ScalarLog log, scalar_log_from_mlflow_run(env, path, tag));
    return lr_series_from_log(log, tag);
  }
  std::string file = path;
  if (dir && fmt == "trainer_state") file = path + "/trainer_state.json";
  if (dir && fmt == "csv") file = path + "/metrics.csv";
  CKPT_ASSIGN_OR_RETURN(std::string text, read_text_file(env, file, kMaxLogFileBytes));
  if (fmt == "auto") fmt = content_format(text);
  if (fmt == "tensorboard") {
    CKPT_ASSIGN_OR_RETURN(ScalarLog log, scalar_log_from_event_bytes(text, file));
    return lr_series_from_log(log, tag);
  }
  if (fmt == "mlflow" || fmt == "mlflow_metric") {
    CKPT_ASSIGN_OR_RETURN(ScalarLog log,
                          scalar_log_from_mlflow_text(text, file, file_base_name(file)));
    return lr_series_from_log(log, tag.empty() ? file_base_name(file) : tag);
  }
  if (fmt == "csv") {
    CKPT_ASSIGN_OR_RETURN(ScalarLog log, scalar_log_from_csv_text(text, file));
    auto series = lr_series_from_log(log, tag);
    if (!series.is_ok() && series.status().code() == Code::kCorrupt) {
      return corrupt(file + ": no learning-rate points (no row with both a step and an LR)");
    }
    return series;
  }
  if (fmt == "jsonl") return single(lr_from_jsonl_text(text, file), tag, "lr");
  return single(lr_from_trainer_state_text(text, file), tag, "learning_rate");
}

Result<LrSeries> load_lr_series(Env* env, const std::string& path, const std::string& format) {
  CKPT_ASSIGN_OR_RETURN(std::vector<LrSeries> all, load_lr_log(env, path, format, ""));
  return std::move(all.front());
}

}  // namespace ckpt::analytics
