#include "analytics/lr/lr_foreign.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "analytics/input/json_text.h"
#include "analytics/lr/tb/tb_events.h"
#include "analytics/lr/tb/tfrecord.h"
#include "ckpt/base/text.h"
#include "ckpt/io/env.h"

namespace ckpt::analytics {
namespace {

// Whether `p` is a regular file, symbolic links followed (open_random opens nothing else).
bool is_regular(Env* env, const std::string& p) { return env->open_random(p).is_ok(); }

// Whether the regular file at `path` starts with a TFRecord header (reads 12 bytes).
bool file_is_event_file(Env* env, const std::string& path) {
  auto file = env->open_random(path);
  char head[12];
  if (!file.is_ok() || (*file)->size() < sizeof head) return false;
  if (!(*file)->read_at(0, head, sizeof head).is_ok()) return false;
  return tb::looks_like_tfrecord(std::string_view(head, sizeof head));
}

struct TreeWalk {
  std::vector<std::string> files;
  size_t visited = 0;
  bool too_many = false;
  bool too_deep = false;
};

void walk(Env* env, const std::string& dir, int depth, TreeWalk* w) {
  if (depth > kMaxLogTreeDepth) {
    w->too_deep = true;
    return;
  }
  for (const auto& name : env->list_dir_or_empty(dir)) {
    if (++w->visited > kMaxLogTreeFiles) {
      w->too_many = true;
      return;
    }
    const std::string p = dir + "/" + name;
    auto kind = env->entry_kind(p);  // links are not followed
    if (!kind.is_ok()) continue;
    if (*kind == FileKind::kDirectory) {
      walk(env, p, depth + 1, w);
    } else if (*kind == FileKind::kRegular && file_is_event_file(env, p)) {
      w->files.push_back(p);
    }
  }
}

// Adds the metric files under `dir` (name relative to metrics/ is the tag).
Status add_mlflow_metrics(Env* env, const std::string& dir, const std::string& prefix,
                          const std::string& want, int depth, ScalarLog* log, size_t* files) {
  if (depth > kMaxLogTreeDepth) return corrupt(dir + ": folders nested too deep");
  for (const auto& name : env->list_dir_or_empty(dir)) {
    const std::string p = dir + "/" + name;
    const std::string tag = prefix.empty() ? name : prefix + "/" + name;
    if (++*files > kMaxLogTreeFiles) {
      return corrupt(dir + ": more than " + std::to_string(kMaxLogTreeFiles) + " metric files");
    }
    if (env->is_dir(p)) {
      CKPT_RETURN_IF_ERROR(add_mlflow_metrics(env, p, tag, want, depth + 1, log, files));
      continue;
    }
    if (!is_lr_tag(tag) && tag != want) continue;  // only LR metrics, or the one --tag names
    CKPT_ASSIGN_OR_RETURN(std::string text, read_text_file(env, p, kMaxLogFileBytes));
    CKPT_ASSIGN_OR_RETURN(ScalarLog one, scalar_log_from_mlflow_text(text, p, tag));
    auto& samples = log->launches[0].samples;
    samples.insert(samples.end(), one.launches[0].samples.begin(), one.launches[0].samples.end());
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

// Calls fn(line, line_no) for each line of `text`.
template <typename Fn>
Status for_each_line(const std::string& text, Fn fn) {
  LineCursor lines(text);
  for (std::string_view line; lines.next(&line);) {
    CKPT_RETURN_IF_ERROR(fn(std::string(line), lines.number()));
  }
  return Status::ok();
}

}  // namespace

Result<ScalarLog> scalar_log_from_event_bytes(std::string_view bytes, const std::string& path) {
  CKPT_ASSIGN_OR_RETURN(tb::EventFile file, tb::parse_event_file(bytes, path));
  ScalarLog log;
  log.source = path;
  log.format = "tensorboard";
  if (!file.torn.empty()) {
    log.warnings.push_back(path + ": " + file.torn + " (a writer killed mid-record?); the " +
                           std::to_string(file.events) + " records before it are used");
  }
  ScalarLaunch launch;
  launch.source = path;
  launch.start_wall_time = file.first_wall_time;
  for (auto& v : file.scalars) {
    if (!std::isfinite(v.value)) continue;
    launch.samples.push_back({std::move(v.tag), v.step, v.value, v.wall_time});
  }
  log.launches.push_back(std::move(launch));
  return log;
}

Result<ScalarLog> scalar_log_from_tensorboard(Env* env, const std::string& path) {
  std::vector<std::string> files;
  if (env->is_dir(path)) {
    TreeWalk w;
    walk(env, path, 0, &w);
    if (w.too_many) {
      return corrupt(path + ": more than " + std::to_string(kMaxLogTreeFiles) +
                     " entries under this folder; point at the run's own log folder");
    }
    if (w.too_deep) {
      return corrupt(path + ": folders nested more than " + std::to_string(kMaxLogTreeDepth) +
                     " deep");
    }
    files = std::move(w.files);
    if (files.empty()) return not_found(path + ": no TensorBoard event file under this folder");
  } else {
    files.push_back(path);
  }
  ScalarLog log;
  log.source = path;
  log.format = "tensorboard";
  uint64_t total = 0;
  for (const auto& f : files) {
    CKPT_ASSIGN_OR_RETURN(std::string bytes, read_text_file(env, f, kMaxLogFileBytes));
    total += bytes.size();
    if (total > kMaxLogTreeBytes) {
      return corrupt(path + ": event files over " + std::to_string(kMaxLogTreeBytes) +
                     " bytes in all");
    }
    CKPT_ASSIGN_OR_RETURN(ScalarLog one, scalar_log_from_event_bytes(bytes, f));
    log.warnings.insert(log.warnings.end(), one.warnings.begin(), one.warnings.end());
    log.launches.push_back(std::move(one.launches[0]));
  }
  // Launches in wall-time order of their first event (file names break ties).
  std::stable_sort(log.launches.begin(), log.launches.end(),
                   [](const ScalarLaunch& a, const ScalarLaunch& b) {
                     return a.start_wall_time < b.start_wall_time;
                   });
  return log;
}

bool looks_like_mlflow_metric(std::string_view text) {
  const size_t end = text.find('\n');
  std::string line(text.substr(0, end));
  if (!line.empty() && line.back() == '\r') line.pop_back();
  size_t spaces = 0;
  for (char c : line) {
    if (c == ' ') {
      ++spaces;
    } else if (!(std::isdigit(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == '+' ||
                 c == 'e' || c == 'E')) {
      return false;
    }
  }
  return spaces == 2 && line.front() != ' ' && line.back() != ' ' &&
         line.find("  ") == std::string::npos;
}

Result<ScalarLog> scalar_log_from_mlflow_text(const std::string& text, const std::string& path,
                                              const std::string& tag) {
  ScalarLog log;
  log.source = path;
  log.format = "mlflow";
  log.launches.resize(1);
  log.launches[0].source = path;
  auto& samples = log.launches[0].samples;
  CKPT_RETURN_IF_ERROR(for_each_line(text, [&](const std::string& line, int64_t no) -> Status {
    if (is_blank(line)) return Status::ok();
    const std::string where = path + ":" + std::to_string(no);
    std::vector<std::string> cells;
    size_t b = 0;
    while (b <= line.size() && cells.size() < 4) {
      size_t e = line.find(' ', b);
      if (e == std::string::npos) e = line.size();
      cells.push_back(line.substr(b, e - b));
      b = e + 1;
    }
    double ms = 0;
    ScalarSample s;
    s.tag = tag;
    if (cells.size() != 3 || !parse_double(cells[0], &ms) || !parse_double(cells[1], &s.value) ||
        !parse_step(cells[2], &s.step)) {
      return corrupt(where + ": expected \"timestamp value step\", got \"" +
                     escape_bytes(line, 80) + "\"");
    }
    s.wall_time = ms / 1000.0;
    if (std::isfinite(s.value)) samples.push_back(s);
    return Status::ok();
  }));
  if (!samples.empty()) log.launches[0].start_wall_time = samples.front().wall_time;
  return log;
}

Result<ScalarLog> scalar_log_from_mlflow_run(Env* env, const std::string& run_dir,
                                             const std::string& tag) {
  const std::string metrics = env->is_dir(run_dir + "/metrics") ? run_dir + "/metrics" : run_dir;
  ScalarLog log;
  log.source = run_dir;
  log.format = "mlflow";
  log.launches.resize(1);
  log.launches[0].source = metrics;
  size_t files = 0;
  CKPT_RETURN_IF_ERROR(add_mlflow_metrics(env, metrics, "", tag, 0, &log, &files));
  auto& samples = log.launches[0].samples;
  if (samples.empty()) {
    if (!tag.empty()) {
      return invalid_argument(run_dir + ": no metric named \"" + escape_bytes(tag, 80) +
                              "\" under " + metrics);
    }
    return corrupt(run_dir + ": no learning-rate metric under " + metrics +
                   " (names such as lr, learning_rate, lr-AdamW); name one with --tag");
  }
  // Files are read one after the other; the series are told apart by tag, and each tag's samples
  // stay in file order. The launch starts at the earliest sample.
  double start = samples.front().wall_time;
  for (const auto& s : samples) start = std::min(start, s.wall_time);
  log.launches[0].start_wall_time = start;
  return log;
}

Result<ScalarLog> scalar_log_from_csv_text(const std::string& text, const std::string& path) {
  ScalarLog log;
  log.source = path;
  log.format = "csv";
  log.launches.resize(1);
  log.launches[0].source = path;
  auto& samples = log.launches[0].samples;
  int step_col = -1;
  std::vector<std::pair<size_t, std::string>> lr_cols;
  size_t header_cells = 0;
  CKPT_RETURN_IF_ERROR(for_each_line(text, [&](const std::string& line, int64_t no) -> Status {
    if (is_blank(line)) return Status::ok();
    const auto cells = split_csv(line);
    const std::string where = path + ":" + std::to_string(no);
    if (step_col < 0) {
      for (size_t i = 0; i < cells.size(); ++i) {
        if (cells[i] == "step") step_col = static_cast<int>(i);
        if (is_lr_tag(cells[i])) lr_cols.emplace_back(i, cells[i]);
      }
      if (step_col < 0 || lr_cols.empty()) {
        return corrupt(where +
                       ": CSV header must name a \"step\" column and an \"lr\" or "
                       "\"learning_rate\" column (or LearningRateMonitor's lr-<Optimizer>), got "
                       "\"" +
                       escape_bytes(line, 120) + "\"");
      }
      header_cells = cells.size();
      return Status::ok();
    }
    if (cells.size() != header_cells) {
      return corrupt(where + ": expected " + std::to_string(header_cells) +
                     " cells as in the header, got " + std::to_string(cells.size()));
    }
    const std::string& step_cell = cells[static_cast<size_t>(step_col)];
    for (const auto& [col, tag] : lr_cols) {
      // Loggers such as Lightning's CSVLogger leave the LR cell empty on rows that log other
      // metrics (validation); those rows carry no LR and are not errors.
      const std::string& lr_cell = cells[col];
      if (lr_cell.empty()) continue;
      ScalarSample s;
      s.tag = tag;
      if (!parse_step(step_cell, &s.step)) {
        return corrupt(where + ": step must be a non-negative integer, got \"" +
                       escape_bytes(step_cell, 40) + "\"");
      }
      if (!parse_double(lr_cell, &s.value) || !std::isfinite(s.value)) {
        return corrupt(where + ": learning rate must be a finite number, got \"" +
                       escape_bytes(lr_cell, 40) + "\"");
      }
      samples.push_back(s);
    }
    return Status::ok();
  }));
  if (step_col < 0) return corrupt(path + ": empty CSV (no header)");
  return log;
}

Result<ScalarLog> scalar_log_from_csv_versions(Env* env, const std::string& dir) {
  std::vector<std::string> files;
  for (const auto& a : env->list_dir_or_empty(dir)) {
    const std::string pa = dir + "/" + a;
    if (!env->is_dir(pa)) continue;
    if (is_regular(env, pa + "/metrics.csv")) files.push_back(pa + "/metrics.csv");
    for (const auto& b : env->list_dir_or_empty(pa)) {
      if (is_regular(env, pa + "/" + b + "/metrics.csv")) {
        files.push_back(pa + "/" + b + "/metrics.csv");
      }
      if (files.size() > kMaxLogTreeFiles) return corrupt(dir + ": too many metrics.csv files");
    }
  }
  if (files.empty()) return not_found(dir + ": no metrics.csv");
  std::sort(files.begin(), files.end(), lr_tag_order);
  ScalarLog log;
  log.source = dir;
  log.format = "csv";
  for (const auto& f : files) {
    CKPT_ASSIGN_OR_RETURN(std::string text, read_text_file(env, f, kMaxLogFileBytes));
    CKPT_ASSIGN_OR_RETURN(ScalarLog one, scalar_log_from_csv_text(text, f));
    log.launches.push_back(std::move(one.launches[0]));
  }
  return log;
}

}  // namespace ckpt::analytics
