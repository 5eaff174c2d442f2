#include "profile/recorder/cpu_sampler.h"

#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace ckpt::profile {

namespace {

std::vector<uint64_t> numbers_after(std::string_view text, size_t pos, size_t max_count) {
  std::vector<uint64_t> out;
  const char* p = text.data() + pos;
  const char* end = text.data() + text.size();
  while (p < end && out.size() < max_count && *p != '\n') {
    while (p < end && *p == ' ') ++p;
    if (p >= end || *p == '\n') break;
    char* next = nullptr;
    uint64_t v = std::strtoull(p, &next, 10);
    if (next == p) {  // a non-numeric field (the process state letter): record it as 0
      while (p < end && *p != ' ' && *p != '\n') ++p;
      out.push_back(0);
      continue;
    }
    out.push_back(v);
    p = next;
  }
  return out;
}

std::string read_all(const char* path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

Result<HostCpuTicks> parse_proc_stat(std::string_view text) {
  if (text.substr(0, 4) != "cpu ") {
    return corrupt("/proc/stat: expected a first line starting with \"cpu \"");
  }
  auto v = numbers_after(text, 4, 10);
  if (v.size() < 4) return corrupt("/proc/stat: expected at least 4 counters on the cpu line");
  auto at = [&](size_t i) -> uint64_t { return i < v.size() ? v[i] : 0; };
  // user nice system idle iowait irq softirq steal guest guest_nice (guest is inside user)
  HostCpuTicks t;
  t.busy = at(0) + at(1) + at(2) + at(5) + at(6) + at(7);
  t.idle = at(3);
  t.iowait = at(4);
  return t;
}

Result<uint64_t> parse_proc_self_stat(std::string_view text) {
  size_t close = text.rfind(')');
  if (close == std::string_view::npos) {
    return corrupt("/proc/self/stat: expected \"pid (comm) state ...\"");
  }
  // After ')': state(3) ppid pgrp session tty_nr tpgid flags minflt cminflt majflt cmajflt
  // utime(14) stime(15): indices 11 and 12 counting from the state field.
  auto v = numbers_after(text, close + 1, 13);
  if (v.size() < 13) return corrupt("/proc/self/stat: too few fields after the command name");
  return v[11] + v[12];
}

CpuMeter::CpuMeter() {
  unsigned hc = std::thread::hardware_concurrency();
  cores_ = hc == 0 ? 1 : static_cast<int>(hc);
  long t = sysconf(_SC_CLK_TCK);
  if (t > 0) ticks_per_s_ = t;
}

std::optional<CpuUtilisation> CpuMeter::sample(double now_s) {
  auto host = parse_proc_stat(read_all("/proc/stat"));
  auto proc = parse_proc_self_stat(read_all("/proc/self/stat"));
  if (!host.is_ok() || !proc.is_ok()) return std::nullopt;
  std::optional<CpuUtilisation> out;
  if (have_prev_) {
    uint64_t dt = host->total() - prev_host_.total();
    double wall = now_s - prev_t_;
    if (dt > 0 && wall > 0) {
      CpuUtilisation u;
      u.host_busy = double(host->busy - prev_host_.busy) / double(dt);
      u.host_iowait = double(host->iowait - prev_host_.iowait) / double(dt);
      u.process_busy = double(*proc - prev_proc_) / double(ticks_per_s_) / wall / double(cores_);
      out = u;
    }
  }
  have_prev_ = true;
  prev_host_ = *host;
  prev_proc_ = *proc;
  prev_t_ = now_s;
  return out;
}

}  // namespace ckpt::profile
