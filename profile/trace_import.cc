#include "profile/trace_import.h"

#include <simdjson.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <system_error>

#include "profile/recorder_file.h"

namespace ckpt::profile {

namespace {

struct Interval {
  double start, end;
  Phase phase;
};

bool starts_with(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }
bool ends_with(std::string_view s, std::string_view p) {
  return s.size() >= p.size() && s.substr(s.size() - p.size()) == p;
}
bool contains(std::string_view s, std::string_view p) {
  return s.find(p) != std::string_view::npos;
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// The phase an event belongs to, or nullopt for events the breakdown does not name (plain ops and
// compute kernels: they are the unattributed rest of the step).
std::optional<Phase> classify(std::string_view name, std::string_view cat) {
  if (starts_with(name, "enumerate(DataLoader)#") || starts_with(name, "enumerate(DataPipe)#") ||
      ends_with(name, "train_dataloader_next")) {
    return Phase::kDataWait;
  }
  if (starts_with(name, "c10d::") || starts_with(name, "gloo:") || starts_with(name, "nccl:") ||
      starts_with(name, "nccl") || contains(name, "ncclKernel") ||
      contains(name, "ncclDevKernel") || name == "record_param_comms") {
    return Phase::kCollective;
  }
  if (starts_with(name, "Memcpy HtoD")) return Phase::kH2D;
  if (starts_with(name, "Optimizer.step#") || starts_with(name, "Optimizer.zero_grad#")) {
    return Phase::kOptimizer;
  }
  if (starts_with(name, "autograd::engine::evaluate_function")) return Phase::kBackward;
  // User annotations: record_function names. Operators ("aten::...") never match below.
  if (contains(name, "::") && !starts_with(name, "[pl]")) return std::nullopt;
  if (cat == "kernel" || cat == "cuda_runtime" || cat == "cpu_op") return std::nullopt;
  std::string l = lower(name);
  if (contains(l, "checkpoint") || contains(l, "save_state") || contains(l, "ckpt")) {
    return Phase::kCheckpoint;
  }
  if (starts_with(l, "eval") || contains(l, "validation") || contains(l, "val_loop") ||
      contains(l, "_evaluationloop") || contains(l, "evaluate")) {
    return Phase::kEval;
  }
  if (contains(l, "backward")) return Phase::kBackward;
  if (contains(l, "forward") || contains(l, "training_step")) return Phase::kForward;
  return std::nullopt;
}

// Priority when events overlap: lower value wins.
constexpr int kPriority[kNumPhases] = {
    /*data_wait*/ 2,  /*h2d*/ 4,        /*forward*/ 7, /*backward*/ 6,
    /*optimizer*/ 5,
    /*collective*/ 3, /*checkpoint*/ 0, /*eval*/ 1,    /*other*/ 8};

// Exclusive time per phase inside [lo, hi), by priority.
PhaseTimes attribute(std::vector<Interval>& spans) {
  struct Edge {
    double t;
    int delta;
    int phase;
  };
  std::vector<Edge> edges;
  edges.reserve(spans.size() * 2);
  for (const auto& s : spans) {
    edges.push_back({s.start, +1, index(s.phase)});
    edges.push_back({s.end, -1, index(s.phase)});
  }
  std::sort(edges.begin(), edges.end(), [](const Edge& a, const Edge& b) { return a.t < b.t; });
  PhaseTimes out{};
  int active[kNumPhases] = {};
  double prev = edges.empty() ? 0 : edges.front().t;
  for (const auto& e : edges) {
    int best = -1;
    for (int p = 0; p < kNumPhases; ++p) {
      if (active[p] > 0 && (best < 0 || kPriority[p] < kPriority[best])) best = p;
    }
    if (best >= 0) out[best] += e.t - prev;
    prev = e.t;
    active[e.phase] += e.delta;
  }
  return out;
}

bool number(simdjson::dom::element e, double* out) {
  if (!e.get_double().get(*out)) return true;
  int64_t i = 0;
  if (!e.get_int64().get(i)) {
    *out = double(i);
    return true;
  }
  uint64_t u = 0;
  if (!e.get_uint64().get(u)) {
    *out = double(u);
    return true;
  }
  // Some exporters write timestamps as strings.
  std::string_view s;
  if (!e.get_string().get(s)) {
    std::string tmp(s);
    char* end = nullptr;
    *out = std::strtod(tmp.c_str(), &end);
    return end != tmp.c_str();
  }
  return false;
}

}  // namespace

Result<RankTrace> import_pytorch_trace_text(std::string_view json, const std::string& source) {
  if (json.find_first_not_of(" \t\r\n") == std::string_view::npos) {
    return corrupt(source + ": empty file (expected a PyTorch profiler trace)");
  }
  simdjson::dom::parser parser;
  simdjson::padded_string padded(json);
  simdjson::dom::element root;
  if (auto err = parser.parse(padded).get(root)) {
    return corrupt(source + ": not valid JSON (" + simdjson::error_message(err) + ")");
  }
  RankTrace trace;
  trace.source = source;
  trace.format = "pytorch-trace";
  simdjson::dom::array events;
  if (root.is_array()) {
    events = root.get_array().value_unsafe();
  } else if (root.is_object()) {
    if (root["traceEvents"].get_array().get(events)) {
      return corrupt(source + ": expected a \"traceEvents\" array in the trace object");
    }
    simdjson::dom::object info;
    if (!root["distributedInfo"].get_object().get(info)) {
      int64_t v = 0;
      if (!info["rank"].get_int64().get(v)) trace.rank = static_cast<int>(v);
      if (!info["world_size"].get_int64().get(v)) trace.world_size = static_cast<int>(v);
    }
  } else {
    return corrupt(source + ": expected a JSON object or array of trace events");
  }

  struct StepWindow {
    int64_t step;
    double start, end;
  };
  std::vector<StepWindow> windows;
  std::vector<Interval> spans;
  std::vector<std::pair<double, bool>> copies;  // (start, pinned)
  double first_ts = 0, last_end = 0;
  bool any = false;
  for (simdjson::dom::element ev : events) {
    simdjson::dom::object obj;
    if (ev.get_object().get(obj)) continue;
    std::string_view ph, name, cat;
    if (obj["ph"].get_string().get(ph) || ph != "X") continue;
    if (obj["name"].get_string().get(name)) continue;
    if (obj["cat"].get_string().get(cat)) cat = {};  // "cat" is optional (absent in old traces)
    simdjson::dom::element ts_el, dur_el;
    double ts = 0, dur = 0;
    if (obj["ts"].get(ts_el) || !number(ts_el, &ts)) {
      return corrupt(source + ": event \"" + std::string(name) + "\" has no numeric ts");
    }
    if (!obj["dur"].get(dur_el) && !number(dur_el, &dur)) {
      return corrupt(source + ": event \"" + std::string(name) + "\" has a non-numeric dur");
    }
    if (dur < 0) dur = 0;
    double start = ts * 1e-6, end = (ts + dur) * 1e-6;  // chrome traces count microseconds
    if (!any || start < first_ts) first_ts = start;
    last_end = any ? std::max(last_end, end) : end;
    any = true;
    if (starts_with(name, "ProfilerStep#")) {
      std::string num(name.substr(13));
      char* stop = nullptr;
      long long n = std::strtoll(num.c_str(), &stop, 10);
      if (stop == num.c_str()) continue;
      windows.push_back({n, start, end});
      continue;
    }
    auto phase = classify(name, cat);
    if (!phase) continue;
    spans.push_back({start, end, *phase});
    if (*phase == Phase::kH2D) copies.push_back({start, contains(name, "Pinned")});
  }
  if (windows.empty()) {
    return corrupt(source +
                   ": no ProfilerStep#N events (profile with a schedule and call "
                   "prof.step() every iteration)");
  }
  std::sort(windows.begin(), windows.end(),
            [](const StepWindow& a, const StepWindow& b) { return a.start < b.start; });
  std::sort(spans.begin(), spans.end(),
            [](const Interval& a, const Interval& b) { return a.start < b.start; });
  double origin = windows.front().start;

  // Each span is clipped to the step windows it overlaps; spans are sorted by start and windows
  // do not overlap, so one pass with a moving lower bound suffices.
  std::vector<std::vector<Interval>> per_step(windows.size());
  size_t first_window = 0;
  for (const auto& s : spans) {
    while (first_window < windows.size() && windows[first_window].end <= s.start) ++first_window;
    for (size_t w = first_window; w < windows.size() && windows[w].start < s.end; ++w) {
      double lo = std::max(s.start, windows[w].start), hi = std::min(s.end, windows[w].end);
      if (hi > lo) per_step[w].push_back({lo, hi, s.phase});
    }
  }
  trace.steps.reserve(windows.size());
  size_t copy_i = 0;
  std::sort(copies.begin(), copies.end());
  for (size_t w = 0; w < windows.size(); ++w) {
    StepRecord r;
    r.step = windows[w].step;
    r.start_s = windows[w].start - origin;
    r.duration_s = windows[w].end - windows[w].start;
    r.phase_s = attribute(per_step[w]);
    while (copy_i < copies.size() && copies[copy_i].first < windows[w].end) {
      if (copies[copy_i].first >= windows[w].start) {
        copies[copy_i].second ? ++r.pinned_h2d : ++r.pageable_h2d;
      }
      ++copy_i;
    }
    trace.steps.push_back(r);
  }
  trace.end_s = last_end - origin;
  return trace;
}

std::optional<int> rank_from_file_name(const std::string& path) {
  std::string name = lower(
      path.substr(path.find_last_of('/') == std::string::npos ? 0 : path.find_last_of('/') + 1));
  size_t pos = 0;
  while ((pos = name.find("rank", pos)) != std::string::npos) {
    size_t i = pos + 4;
    while (i < name.size() && (name[i] == '_' || name[i] == '-' || name[i] == '.')) ++i;
    size_t j = i;
    while (j < name.size() && std::isdigit(static_cast<unsigned char>(name[j]))) ++j;
    if (j > i && j - i < 9) return std::stoi(name.substr(i, j - i));
    pos += 4;
  }
  return std::nullopt;
}

Result<std::string> read_file_text(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return not_found(path + ": no such file");
  if (std::filesystem::is_directory(path, ec)) {
    return io_error(path + ": is a directory, expected a trace file");
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return io_error(path + ": cannot open (" + std::strerror(errno) + ")");
  std::stringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return io_error(path + ": read failed");
  return ss.str();
}

Result<std::vector<RankTrace>> load_traces(const std::vector<std::string>& paths) {
  std::vector<RankTrace> out;
  for (size_t i = 0; i < paths.size(); ++i) {
    CKPT_ASSIGN_OR_RETURN(std::string text, read_file_text(paths[i]));
    Result<RankTrace> t = looks_like_recorder_file(text)
                              ? decode_recorder_text(text, paths[i])
                              : import_pytorch_trace_text(text, paths[i]);
    if (!t.is_ok()) return t.status();
    if (t->rank < 0) {
      auto r = rank_from_file_name(paths[i]);
      t->rank = r ? *r : static_cast<int>(i);
    }
    out.push_back(std::move(*t));
  }
  std::stable_sort(out.begin(), out.end(),
                   [](const RankTrace& a, const RankTrace& b) { return a.rank < b.rank; });
  for (size_t i = 1; i < out.size(); ++i) {
    if (out[i].rank == out[i - 1].rank) {
      return invalid_argument(out[i].source + ": rank " + std::to_string(out[i].rank) +
                              " also given by " + out[i - 1].source);
    }
  }
  int world = static_cast<int>(out.size());
  for (auto& t : out) {
    if (t.world_size < world) t.world_size = world;
  }
  return out;
}

}  // namespace ckpt::profile
