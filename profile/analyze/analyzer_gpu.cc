// The GPU side of a step (Kineto traces with CUDA kernel, memcpy and memset events): how busy the
// GPU was, how long it sat idle while the host waited for data, how much NCCL time no compute
// kernel hid (exposed communication), pageable host-to-device copies, host syncs. Fractions are
// of step time, over every rank's steps. One verdict, gpu_idle, when the GPU is idle for a large
// share of the step; the rest is evidence and the utilisation summary.
#include <algorithm>

#include "profile/analyze/analyzer.h"
#include "profile/analyze/analyzer_internal.h"
#include "profile/analyze/series_stats.h"

namespace ckpt::profile::detail {

void check_gpu(const std::vector<RankTrace>& traces, const AnalyzeOptions& o, Report& rep) {
  double total = 0, busy = 0, idle_dw = 0, comm = 0, exposed = 0, pageable = 0, sync = 0;
  size_t steps = 0;
  for (const auto& t : traces) {
    if (!t.has_gpu) continue;
    for (const auto& s : t.steps) {
      total += s.duration_s;
      busy += s.gpu.busy_s;
      idle_dw += s.gpu.idle_in_data_wait_s;
      comm += s.gpu.comm_s;
      exposed += s.gpu.exposed_comm_s;
      pageable += s.gpu.pageable_h2d_s;
      sync += s.gpu.sync_s;
      ++steps;
    }
  }
  if (steps == 0 || total <= 0) return;
  Utilisation& u = rep.utilisation;
  u.gpu_idle = r4(std::max(0.0, 1.0 - busy / total));
  u.gpu_idle_in_data_wait = r4(idle_dw / total);
  u.gpu_comm = r4(comm / total);
  u.gpu_exposed_comm = r4(exposed / total);
  u.gpu_pageable_h2d = r4(pageable / total);
  u.host_sync = r4(sync / total);
  if (u.gpu_idle < o.input_high) return;
  Verdict v;
  v.set(VerdictId::kGpuIdle);
  v.set_impact(std::max(0.0, total - busy), total);
  v.confidence = r4(std::min(1.0, 0.5 + u.gpu_idle / 2));
  double dw_share = u.gpu_idle > 0 ? u.gpu_idle_in_data_wait / u.gpu_idle : 0;
  v.evidence = {{"gpu_idle_fraction", u.gpu_idle},
                {"gpu_idle_in_data_wait_fraction", u.gpu_idle_in_data_wait},
                {"idle_share_waiting_for_data", r4(dw_share)},
                {"gpu_busy_p50", u.p50},
                {"exposed_comm_fraction", u.gpu_exposed_comm},
                {"host_sync_fraction", u.host_sync},
                {"steps", steps}};
  v.summary =
      fmt("the GPU is idle %.0f%% of step time waiting for the host (%.0f%% of that idle "
          "time the host waits for data)",
          100 * u.gpu_idle, 100 * dw_share);
  rep.verdicts.push_back(v);
}

}  // namespace ckpt::profile::detail
