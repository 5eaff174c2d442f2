// Host and process CPU utilisation from /proc, for the recorder's background thread.
//
// `parse_proc_stat` and `parse_proc_self_stat` are pure (text in, counters out) so tests feed them
// fixed text. CpuMeter keeps the previous reading and turns two readings into utilisation
// fractions; it is owned by one thread (the recorder's sampler) and is not thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "ckpt/base/status.h"

namespace ckpt::profile {

// The aggregate "cpu" line of /proc/stat, in clock ticks.
struct HostCpuTicks {
  uint64_t busy = 0;    // user + nice + system + irq + softirq + steal
  uint64_t iowait = 0;  // counted apart: some monitors report it as busy, the analyzer must not
  uint64_t idle = 0;
  uint64_t total() const { return busy + iowait + idle; }
};

Result<HostCpuTicks> parse_proc_stat(std::string_view text);
// utime + stime of /proc/self/stat, in clock ticks. The command name may contain spaces and
// parentheses, so fields are counted from the last ')'.
Result<uint64_t> parse_proc_self_stat(std::string_view text);

struct CpuUtilisation {
  double host_busy = 0;
  double host_iowait = 0;
  double process_busy = 0;  // of all cores
};

class CpuMeter {
 public:
  CpuMeter();
  int cores() const { return cores_; }
  // Reads /proc now; returns utilisation since the previous call (nullopt on the first call or
  // when /proc is unreadable, e.g. outside Linux).
  std::optional<CpuUtilisation> sample(double now_s);

 private:
  int cores_ = 1;
  long ticks_per_s_ = 100;
  bool have_prev_ = false;
  HostCpuTicks prev_host_;
  uint64_t prev_proc_ = 0;
  double prev_t_ = 0;
};

}  // namespace ckpt::profile
