#include "profile/import/trace_import.h"

#include <simdjson.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>

#include "profile/import/input_file.h"
#include "profile/import/trace_intervals.h"
#include "profile/recorder/recorder_file.h"

namespace ckpt::profile {

namespace {

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
  // Kineto's categories, as written today and by 2021's Kineto ("Kernel", "Runtime", "Operator").
  std::string c = lower(cat);
  if (c == "kernel" || c == "cuda_runtime" || c == "cpu_op" || c == "runtime" || c == "operator") {
    return std::nullopt;
  }
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

namespace od = simdjson::ondemand;

// The fields of one trace event the importer reads; strings point into the parser's buffers.
struct EventFields {
  std::string_view ph, name, cat;
  double ts = 0, dur = 0;
  int64_t pid = -1;  // numeric pids only: Kineto's OS process id (the legacy form writes a label)
  bool has_ts = false, ts_ok = true, dur_ok = true;
};

struct StepWindow {
  int64_t step;
  double start, end;
};

// Everything one pass over the events keeps: compact intervals, never the events themselves.
struct Collected {
  std::vector<StepWindow> windows;
  std::vector<Interval> spans;
  std::vector<std::pair<double, bool>> copies;  // (start, pinned)
  std::vector<GpuSpan> gpu;
  std::vector<std::pair<double, double>> syncs;  // host time in cuda*Synchronize
  double first_ts = 0, last_end = 0;
  bool any = false;
  std::string loader_iter;
  int64_t step_pid = -1;  // the process that ran the steps (pid of the ProfilerStep events)
};

// A number, or a number written as a string (some exporters do that).
bool read_number(od::value v, double* out) {
  od::json_type t;
  if (v.type().get(t)) return false;
  if (t == od::json_type::number) return !v.get_double().get(*out);
  if (t != od::json_type::string) return false;
  std::string_view s;
  if (v.get_string().get(s)) return false;
  std::string tmp(s);
  char* end = nullptr;
  *out = std::strtod(tmp.c_str(), &end);
  return end != tmp.c_str();
}

simdjson::error_code read_event(od::object obj, EventFields* e) {
  for (auto field : obj) {
    std::string_view key;
    if (auto err = field.unescaped_key().get(key)) return err;
    od::value v;
    if (auto err = field.value().get(v)) return err;
    if (key == "ph") {
      if (v.get_string().get(e->ph)) e->ph = {};
    } else if (key == "name") {
      if (v.get_string().get(e->name)) e->name = {};
    } else if (key == "cat") {
      if (v.get_string().get(e->cat)) e->cat = {};
    } else if (key == "ts") {
      e->has_ts = true;
      e->ts_ok = read_number(v, &e->ts);
    } else if (key == "dur") {
      e->dur_ok = read_number(v, &e->dur);
    } else if (key == "pid") {
      int64_t pid = -1;
      if (!v.get_int64().get(pid)) e->pid = pid;
    }
  }
  return simdjson::SUCCESS;
}

bool is_gpu_category(std::string_view cat) {
  std::string l = lower(cat);
  return l == "kernel" || l == "gpu_memcpy" || l == "gpu_memset" || l == "memcpy" || l == "memset";
}

// One complete ("X") event into the collections. Corrupt for a step or phase event without a
// usable time.
Status collect_event(const EventFields& e, const std::string& source, Collected& c) {
  if (e.ph != "X" || e.name.empty()) return Status::ok();
  if (!e.has_ts || !e.ts_ok) {
    return corrupt(source + ": event \"" + std::string(e.name.substr(0, 80)) +
                   "\" has no numeric ts");
  }
  if (!e.dur_ok) {
    return corrupt(source + ": event \"" + std::string(e.name.substr(0, 80)) +
                   "\" has a non-numeric dur");
  }
  // Microseconds: a dur below zero or over 10^12 (11.6 days), or a ts past 10^18 (31,700 years
  // after the epoch), is no profiler's; summed into step times it would make every figure junk.
  if (!std::isfinite(e.ts) || std::fabs(e.ts) > 1e18 || !std::isfinite(e.dur) || e.dur < 0 ||
      e.dur > 1e12) {
    return corrupt(
        source + ": event \"" + std::string(e.name.substr(0, 80)) + "\" has " +
        (std::isfinite(e.dur) && e.dur >= 0 && e.dur <= 1e12
             ? "ts " + std::to_string(e.ts) + " (out of range)"
             : "dur " + std::to_string(e.dur) + " (negative or longer than 10^12 microseconds)"));
  }
  double dur = e.dur;
  double start = e.ts * 1e-6, end = (e.ts + dur) * 1e-6;  // chrome traces count microseconds
  if (!c.any || start < c.first_ts) c.first_ts = start;
  c.last_end = c.any ? std::max(c.last_end, end) : end;
  c.any = true;
  bool gpu = is_gpu_category(e.cat);
  if (starts_with(e.name, "ProfilerStep#")) {
    if (e.cat == "gpu_user_annotation") return Status::ok();  // the GPU's copy of the window
    std::string num(e.name.substr(13));
    char* stop = nullptr;
    long long n = std::strtoll(num.c_str(), &stop, 10);
    if (stop != num.c_str()) c.windows.push_back({n, start, end});
    if (c.step_pid < 0) c.step_pid = e.pid;
    return Status::ok();
  }
  if (gpu) c.gpu.push_back(gpu_span(e.name, start, end));
  if (!gpu && starts_with(e.name, "cuda") && contains(e.name, "Synchronize")) {
    c.syncs.push_back({start, end});
  }
  if (c.loader_iter.empty() && starts_with(e.name, "enumerate(DataLoader)#")) {
    std::string_view rest = e.name.substr(22);
    c.loader_iter = std::string(rest.substr(0, rest.find('.')));
  }
  auto phase = classify(e.name, e.cat);
  if (!phase) return Status::ok();
  c.spans.push_back({start, end, *phase});
  if (*phase == Phase::kH2D) c.copies.push_back({start, contains(e.name, "Pinned")});
  return Status::ok();
}

Status parse_event_array(od::array events, const std::string& source, Collected& c) {
  for (auto item : events) {
    od::object obj;
    if (auto err = item.get_object().get(obj)) {
      if (err == simdjson::INCORRECT_TYPE) continue;  // not an event object: skip it
      return corrupt(source + ": not valid JSON (" + simdjson::error_message(err) + ")");
    }
    EventFields e;
    if (auto err = read_event(obj, &e)) {
      return corrupt(source + ": not valid JSON (" + simdjson::error_message(err) + ")");
    }
    CKPT_RETURN_IF_ERROR(collect_event(e, source, c));
  }
  return Status::ok();
}

// The document: the object form {"traceEvents": [...], "distributedInfo": {...}} or a plain array.
Status parse_document(simdjson::padded_string_view json, const std::string& source,
                      RankTrace& trace, Collected& c) {
  od::parser parser;
  od::document doc;
  if (auto err = parser.iterate(json).get(doc)) {
    return corrupt(source + ": not valid JSON (" + simdjson::error_message(err) + ")");
  }
  od::json_type type;
  if (auto err = doc.type().get(type)) {
    return corrupt(source + ": not valid JSON (" + simdjson::error_message(err) + ")");
  }
  if (type == od::json_type::array) {
    od::array events;
    if (auto err = doc.get_array().get(events)) {
      return corrupt(source + ": not valid JSON (" + simdjson::error_message(err) + ")");
    }
    return parse_event_array(events, source, c);
  }
  if (type != od::json_type::object) {
    return corrupt(source + ": expected a JSON object or array of trace events");
  }
  od::object root;
  if (auto err = doc.get_object().get(root)) {
    return corrupt(source + ": not valid JSON (" + simdjson::error_message(err) + ")");
  }
  bool have_events = false;
  for (auto field : root) {
    std::string_view key;
    od::value v;
    if (field.unescaped_key().get(key) || field.value().get(v)) {
      return corrupt(source + ": not valid JSON (malformed object)");
    }
    if (key == "traceEvents") {
      od::array events;
      if (v.get_array().get(events)) {
        return corrupt(source + ": expected a \"traceEvents\" array in the trace object");
      }
      CKPT_RETURN_IF_ERROR(parse_event_array(events, source, c));
      have_events = true;
    } else if (key == "distributedInfo") {
      od::object info;
      if (v.get_object().get(info)) continue;
      for (auto f : info) {
        std::string_view k;
        int64_t n = 0;
        if (f.unescaped_key().get(k)) break;
        if ((k == "rank" || k == "world_size") && !f.value().get_int64().get(n)) {
          (k == "rank" ? trace.rank : trace.world_size) = static_cast<int>(n);
        }
      }
    }
  }
  if (!have_events)
    return corrupt(source + ": expected a \"traceEvents\" array in the trace object");
  return Status::ok();
}

// Forward and backward told apart by the autograd engine, whether or not the module is wrapped in
// a record_function (the loss is usually outside it): the time before the step's first backward op
// is forward, the time from the first to the last backward op is backward. Both have the lowest
// priority, so data waits, collectives, copies and the optimizer inside those regions keep their
// own phase.
void add_autograd_regions(const StepWindow& w, std::vector<Interval>& spans) {
  double first_bwd = w.end, last_bwd = w.start;
  for (const auto& s : spans) {
    if (s.phase == Phase::kBackward) {
      first_bwd = std::min(first_bwd, s.start);
      last_bwd = std::max(last_bwd, s.end);
    }
  }
  if (first_bwd >= last_bwd) return;  // no backward op in this step
  if (first_bwd > w.start) spans.push_back({w.start, first_bwd, Phase::kForward});
  spans.push_back({first_bwd, last_bwd, Phase::kBackward});
}

// Each span is clipped to the step windows it overlaps; spans are sorted by start and windows
// do not overlap, so one pass with a moving lower bound suffices.
template <typename Span, typename Add>
void clip_to_windows(const std::vector<Span>& spans, const std::vector<StepWindow>& windows,
                     Add add) {
  size_t first_window = 0;
  for (const auto& s : spans) {
    while (first_window < windows.size() && windows[first_window].end <= s.start) ++first_window;
    for (size_t w = first_window; w < windows.size() && windows[w].start < s.end; ++w) {
      double lo = std::max(s.start, windows[w].start), hi = std::min(s.end, windows[w].end);
      if (hi > lo) add(w, s, lo, hi);
    }
  }
}

RankTrace build_steps(Collected& c, RankTrace trace) {
  auto by_start = [](const auto& a, const auto& b) { return a.start < b.start; };
  std::sort(c.windows.begin(), c.windows.end(), by_start);
  std::sort(c.spans.begin(), c.spans.end(), by_start);
  std::sort(c.gpu.begin(), c.gpu.end(), by_start);
  std::sort(c.copies.begin(), c.copies.end());
  const auto& windows = c.windows;
  double origin = windows.front().start;
  std::vector<std::vector<Interval>> per_step(windows.size());
  clip_to_windows(c.spans, windows, [&](size_t w, const Interval& s, double lo, double hi) {
    per_step[w].push_back({lo, hi, s.phase});
  });
  std::vector<std::vector<GpuSpan>> gpu_step(windows.size());
  clip_to_windows(c.gpu, windows, [&](size_t w, const GpuSpan& s, double lo, double hi) {
    GpuSpan x = s;
    x.start = lo;
    x.end = hi;
    gpu_step[w].push_back(x);
  });
  std::vector<std::vector<std::pair<double, double>>> sync_step(windows.size());
  for (const auto& [a, b] : c.syncs) {
    for (size_t w = 0; w < windows.size(); ++w) {
      double lo = std::max(a, windows[w].start), hi = std::min(b, windows[w].end);
      if (hi > lo) sync_step[w].push_back({lo, hi});
    }
  }
  trace.has_gpu = !c.gpu.empty();
  trace.loader_iter = c.loader_iter;
  trace.steps.reserve(windows.size());
  size_t copy_i = 0;
  for (size_t w = 0; w < windows.size(); ++w) {
    StepRecord r;
    r.step = windows[w].step;
    r.start_s = windows[w].start - origin;
    r.duration_s = windows[w].end - windows[w].start;
    add_autograd_regions(windows[w], per_step[w]);
    r.phase_s = attribute(per_step[w]);
    if (trace.has_gpu) {
      r.gpu = gpu_step_times(gpu_step[w], per_step[w], sync_step[w]);
    }
    while (copy_i < c.copies.size() && c.copies[copy_i].first < windows[w].end) {
      if (c.copies[copy_i].first >= windows[w].start) {
        c.copies[copy_i].second ? ++r.pinned_h2d : ++r.pageable_h2d;
      }
      ++copy_i;
    }
    trace.steps.push_back(r);
  }
  trace.end_s = c.last_end - origin;
  trace.origin_s = origin;
  trace.pid = c.step_pid;
  return trace;
}

// What parsing costs beyond the text: the parser's index holds 4 bytes per token (structural
// characters, strings and scalars outside strings) and its string buffer the unescaped keys and
// values it is asked for (at most every byte inside quotes). Counted in one pass before parsing,
// so that a document of nothing but tokens ("[0,0,0,…", a gzip bomb's favourite) is refused
// instead of taking 5 bytes of memory per byte of text.
uint64_t parse_cost_bytes(std::string_view s) {
  uint64_t tokens = 0, string_bytes = 0;
  bool in_string = false, escaped = false, in_scalar = false;
  for (char ch : s) {
    if (in_string) {
      ++string_bytes;
      if (escaped) {
        escaped = false;
      } else if (ch == '\\') {
        escaped = true;
      } else if (ch == '"') {
        in_string = false;
      }
      continue;
    }
    switch (ch) {
      case '"':
        ++tokens;
        in_string = true;
        in_scalar = false;
        break;
      case '{':
      case '}':
      case '[':
      case ']':
      case ':':
      case ',':
        ++tokens;
        in_scalar = false;
        break;
      case ' ':
      case '\t':
      case '\n':
      case '\r':
        in_scalar = false;
        break;
      default:
        if (!in_scalar) ++tokens;
        in_scalar = true;
    }
  }
  return 4 * tokens + string_bytes;
}

}  // namespace

Result<RankTrace> import_pytorch_trace_text(std::string_view json, const std::string& source) {
  simdjson::padded_string padded(json);
  return import_pytorch_trace_padded(std::string_view(padded.data(), padded.size()),
                                     padded.size() + simdjson::SIMDJSON_PADDING, source);
}

Result<RankTrace> import_pytorch_trace_padded(std::string_view json, size_t capacity,
                                              const std::string& source) {
  // A UTF-8 byte order mark (a trace saved again by an editor or a Windows tool) is no JSON.
  if (json.size() >= 3 && json.compare(0, 3, "\xEF\xBB\xBF") == 0) {
    json.remove_prefix(3);
    capacity -= 3;
  }
  if (json.find_first_not_of(" \t\r\n") == std::string_view::npos) {
    return corrupt(source + ": empty file (expected a PyTorch profiler trace)");
  }
  uint64_t cost = json.size() + parse_cost_bytes(json);
  if (cost > kMaxTraceParseBytes) {
    return corrupt(source + ": parsing would take " + std::to_string(cost >> 20) +
                   " MiB (the text and 4 bytes per JSON token), more than the " +
                   std::to_string(kMaxTraceParseBytes >> 30) + " GiB bound");
  }
  RankTrace trace;
  trace.source = source;
  trace.format = "pytorch-trace";
  Collected c;
  simdjson::padded_string_view view(json.data(), json.size(), capacity);
  if (capacity < json.size() + simdjson::SIMDJSON_PADDING) {
    return internal_error(source + ": trace buffer without parser padding");
  }
  CKPT_RETURN_IF_ERROR(parse_document(view, source, trace, c));
  if (c.windows.empty()) {
    return corrupt(source +
                   ": no ProfilerStep#N events (profile with a schedule and call "
                   "prof.step() every iteration)");
  }
  return build_steps(c, std::move(trace));
}

}  // namespace ckpt::profile
