#include "profile/recorder/recorder_file.h"

#include <simdjson.h>

#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdio>

#include "ckpt/base/text.h"

namespace ckpt::profile {

namespace {

void append_num(std::string& out, double v) {
  char buf[32];
  int n = std::snprintf(buf, sizeof buf, "%.9g", std::isfinite(v) ? v : 0.0);
  out.append(buf, static_cast<size_t>(n));
}

void append_int(std::string& out, int64_t v) {
  char buf[24];
  int n = std::snprintf(buf, sizeof buf, "%" PRId64, v);
  out.append(buf, static_cast<size_t>(n));
}

void append_array(std::string& out, const PhaseTimes& a) {
  out += '[';
  for (int i = 0; i < kNumPhases; ++i) {
    if (i) out += ',';
    append_num(out, a[i]);
  }
  out += ']';
}

Status line_error(const std::string& source, size_t line, const std::string& what) {
  return corrupt(source + ":" + std::to_string(line) + ": " + what);
}

// Reads a number that may have been written as an integer or a double.
bool get_number(simdjson::dom::element e, double* out) {
  if (e.is_double()) return !e.get_double().get(*out);
  int64_t i = 0;
  if (e.is_int64() && !e.get_int64().get(i)) {
    *out = static_cast<double>(i);
    return true;
  }
  uint64_t u = 0;
  if (e.is_uint64() && !e.get_uint64().get(u)) {
    *out = static_cast<double>(u);
    return true;
  }
  return false;
}

bool num_field(simdjson::dom::element doc, const char* key, double* out) {
  simdjson::dom::element e;
  return !doc[key].get(e) && get_number(e, out);
}

bool get_phase_array(simdjson::dom::element e, PhaseTimes* out) {
  simdjson::dom::array arr;
  if (e.get_array().get(arr)) return false;
  if (arr.size() != kNumPhases) return false;
  int i = 0;
  for (auto v : arr) {
    if (!get_number(v, &(*out)[i++])) return false;
  }
  return true;
}

}  // namespace

std::string encode_header(int rank, int world_size, int cpu_cores, double start_unix_s) {
  std::string out = "{\"format\":\"ckpt-profile\",\"version\":1,\"rank\":";
  append_int(out, rank);
  out += ",\"world_size\":";
  append_int(out, world_size);
  out += ",\"cpu_cores\":";
  append_int(out, cpu_cores);
  out += ",\"start_unix_s\":";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f", start_unix_s);
  out += buf;
  out += ",\"phases\":[";
  for (int i = 0; i < kNumPhases; ++i) {
    if (i) out += ',';
    out += '"';
    out += phase_name(static_cast<Phase>(i));
    out += '"';
  }
  out += "]}\n";
  return out;
}

void append_step_line(std::string& out, const StepRecord& r) {
  out += "{\"s\":";
  append_int(out, r.step);
  out += ",\"t\":";
  append_num(out, r.start_s);
  out += ",\"d\":";
  append_num(out, r.duration_s);
  out += ",\"p\":";
  append_array(out, r.phase_s);
  bool any_gpu = false;
  for (double g : r.gpu_s) any_gpu |= g != 0;
  if (any_gpu) {
    out += ",\"g\":";
    append_array(out, r.gpu_s);
  }
  out += ",\"n\":";
  append_int(out, r.samples);
  out += ",\"tok\":";
  append_int(out, r.tokens);
  out += ",\"pg\":";
  append_int(out, r.pageable_h2d);
  out += ",\"pin\":";
  append_int(out, r.pinned_h2d);
  out += "}\n";
}

void append_cpu_line(std::string& out, const CpuSample& c) {
  out += "{\"c\":[";
  append_num(out, c.t_s);
  out += ',';
  append_num(out, c.host_busy);
  out += ',';
  append_num(out, c.host_iowait);
  out += ',';
  append_num(out, c.process_busy);
  out += ',';
  append_int(out, c.step);
  out += ',';
  append_int(out, c.phase);
  out += "]}\n";
}

void append_end_line(std::string& out, double t_s) {
  out += "{\"end\":";
  append_num(out, t_s);
  out += "}\n";
}

bool looks_like_recorder_file(std::string_view head) {
  size_t i = head.find_first_not_of(" \t\r\n");
  return i != std::string_view::npos && head.substr(i, 10) == "{\"format\":" &&
         head.find("\"ckpt-profile\"") != std::string_view::npos;
}

Result<RankTrace> decode_recorder_text(std::string_view text, const std::string& source) {
  RankTrace trace;
  trace.source = source;
  trace.format = kRecorderFormat;
  simdjson::dom::parser parser;
  LineCursor lines(text);
  bool have_header = false;
  for (std::string_view line; lines.next(&line);) {
    const size_t line_no = static_cast<size_t>(lines.number());
    if (is_blank(line)) continue;
    simdjson::dom::element doc;
    if (auto err = parser.parse(line.data(), line.size()).get(doc)) {
      // A process killed mid-write leaves a torn last line: keep what came before it.
      if (lines.last() && have_header) break;
      return line_error(source, line_no,
                        std::string("not a JSON object (") + simdjson::error_message(err) + ")");
    }
    if (!have_header) {
      std::string_view format;
      if (doc["format"].get_string().get(format) || format != kRecorderFormat) {
        return line_error(source, line_no, "expected a ckpt-profile header line");
      }
      int64_t version = 0, rank = 0, world = 0, cores = 0;
      if (doc["version"].get_int64().get(version) || version != kRecorderVersion) {
        return line_error(source, line_no, "unsupported ckpt-profile version (expected 1)");
      }
      if (doc["rank"].get_int64().get(rank) || doc["world_size"].get_int64().get(world) ||
          rank < 0 || world < 1 || rank >= world) {
        return line_error(source, line_no, "header needs 0 <= rank < world_size");
      }
      if (!doc["cpu_cores"].get_int64().get(cores)) trace.cpu_cores = static_cast<int>(cores);
      trace.rank = static_cast<int>(rank);
      trace.world_size = static_cast<int>(world);
      have_header = true;
      continue;
    }
    simdjson::dom::element e;
    if (!doc["s"].get(e)) {
      StepRecord r;
      double step = 0, n = 0, tok = 0, pg = 0, pin = 0;
      simdjson::dom::element g;
      simdjson::dom::element p;
      if (!get_number(e, &step) || !num_field(doc, "t", &r.start_s) ||
          !num_field(doc, "d", &r.duration_s) || doc["p"].get(p) ||
          !get_phase_array(p, &r.phase_s)) {
        return line_error(source, line_no, "step line needs s, t, d and p[9]");
      }
      if (!doc["g"].get(g) && !get_phase_array(g, &r.gpu_s)) {
        return line_error(source, line_no, "g must be an array of 9 numbers");
      }
      // Counters are optional: a recorder that knows no tokens writes none.
      num_field(doc, "n", &n);
      num_field(doc, "tok", &tok);
      num_field(doc, "pg", &pg);
      num_field(doc, "pin", &pin);
      if (r.duration_s < 0) return line_error(source, line_no, "negative step duration");
      r.step = static_cast<int64_t>(step);
      r.samples = static_cast<int64_t>(n);
      r.tokens = static_cast<int64_t>(tok);
      r.pageable_h2d = static_cast<int32_t>(pg);
      r.pinned_h2d = static_cast<int32_t>(pin);
      trace.end_s = std::max(trace.end_s, r.start_s + r.duration_s);
      trace.steps.push_back(r);
    } else if (!doc["c"].get(e)) {
      simdjson::dom::array arr;
      double v[6] = {0, 0, 0, 0, -1, -1};
      if (e.get_array().get(arr) || arr.size() != 6) {
        return line_error(source, line_no, "sampler line needs c[6]");
      }
      int i = 0;
      for (auto x : arr) {
        if (!get_number(x, &v[i++])) return line_error(source, line_no, "c[] must be numbers");
      }
      CpuSample c{v[0], v[1], v[2], v[3], static_cast<int64_t>(v[4]), static_cast<int>(v[5])};
      trace.end_s = std::max(trace.end_s, c.t_s);
      trace.cpu.push_back(c);
    } else if (!doc["end"].get(e)) {
      double t = 0;
      if (!get_number(e, &t)) return line_error(source, line_no, "end must be a number");
      trace.end_s = std::max(trace.end_s, t);
      trace.clean_end = true;
    } else {
      return line_error(source, line_no, "expected a step, sampler or end line");
    }
  }
  if (!have_header) return corrupt(source + ": empty ckpt-profile file (no header line)");
  return trace;
}

}  // namespace ckpt::profile
