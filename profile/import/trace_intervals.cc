#include "profile/import/trace_intervals.h"

#include <algorithm>

namespace ckpt::profile {

GpuSpan gpu_span(std::string_view name, double start, double end) {
  auto has = [&](std::string_view p) { return name.find(p) != std::string_view::npos; };
  GpuKind kind = GpuKind::kCompute;
  if (has("ncclKernel") || has("ncclDevKernel")) {
    kind = GpuKind::kComm;
  } else if (name.substr(0, 11) == "Memcpy HtoD" && has("Pageable")) {
    kind = GpuKind::kPageableH2D;
  } else if (name.substr(0, 6) == "Memcpy" || name.substr(0, 6) == "Memset") {
    kind = GpuKind::kCopy;
  }
  return {start, end, kind};
}

Ranges merge_ranges(Ranges r) {
  std::sort(r.begin(), r.end());
  Ranges out;
  for (const auto& x : r) {
    if (x.second <= x.first) continue;
    if (!out.empty() && x.first <= out.back().second) {
      out.back().second = std::max(out.back().second, x.second);
    } else {
      out.push_back(x);
    }
  }
  return out;
}

double total_length(const Ranges& merged) {
  double s = 0;
  for (const auto& x : merged) s += x.second - x.first;
  return s;
}

double overlap_length(const Ranges& a, const Ranges& b) {
  double s = 0;
  size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    double lo = std::max(a[i].first, b[j].first), hi = std::min(a[i].second, b[j].second);
    if (hi > lo) s += hi - lo;
    (a[i].second < b[j].second) ? ++i : ++j;
  }
  return s;
}

GpuStep gpu_step_times(const std::vector<GpuSpan>& gpu, const std::vector<Interval>& host,
                       const Ranges& syncs) {
  Ranges all, compute, comm, pageable, data_wait;
  for (const auto& g : gpu) {
    all.push_back({g.start, g.end});
    if (g.kind == GpuKind::kCompute) compute.push_back({g.start, g.end});
    if (g.kind == GpuKind::kComm) comm.push_back({g.start, g.end});
    if (g.kind == GpuKind::kPageableH2D) pageable.push_back({g.start, g.end});
  }
  for (const auto& h : host) {
    if (h.phase == Phase::kDataWait) data_wait.push_back({h.start, h.end});
  }
  GpuStep s;
  Ranges busy = merge_ranges(std::move(all)), comp = merge_ranges(std::move(compute)),
         nccl = merge_ranges(std::move(comm)), dw = merge_ranges(std::move(data_wait));
  s.busy_s = total_length(busy);
  s.compute_s = total_length(comp);
  s.comm_s = total_length(nccl);
  s.exposed_comm_s = s.comm_s - overlap_length(nccl, comp);
  s.idle_in_data_wait_s = total_length(dw) - overlap_length(dw, busy);
  s.sync_s = total_length(merge_ranges(syncs));
  s.pageable_h2d_s = total_length(merge_ranges(std::move(pageable)));
  return s;
}

}  // namespace ckpt::profile
