// Private to profile/: the helpers analyzer.cc and analyzer_ranks.cc share (rounding for JSON
// evidence, printf-style summaries, per-step quantities), and the checks each file defines for the
// other. Not installed, not included outside profile/.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "profile/analyze/analyzer.h"

namespace ckpt::profile::detail {

inline double r4(double v) { return std::round(v * 1e4) / 1e4; }
inline double r6(double v) { return std::round(v * 1e6) / 1e6; }

// printf into a std::string; the summaries use at most three numbers.
inline std::string fmt(const char* f, double a, double b = 0, double c = 0) {
  char buf[256];
  std::snprintf(buf, sizeof buf, f, a, b, c);
  return buf;
}

// Collective time of a step (wait for the other ranks included).
inline double coll(const StepRecord& r) { return r.phase_s[index(Phase::kCollective)]; }
// The rank's own time: step start → entering the collective (data wait + compute + the rest).
inline double own_time(const StepRecord& r) { return std::max(0.0, r.duration_s - coll(r)); }
inline double compute_of(const StepRecord& r) {
  return std::max(0.0, r.duration_s - r.phase_s[index(Phase::kDataWait)] - coll(r));
}
inline double named_sum(const StepRecord& r) {
  double s = 0;
  for (int p = 0; p < kNumPhases; ++p) {
    if (p != index(Phase::kOther)) s += r.phase_s[p];
  }
  return s;
}

// The steps every rank holds, as a rows × ranks matrix of each rank's own quantities: own time
// (step start → entering the collective), collective time, and the wait for the others (its
// collective time less the per-step minimum over ranks, the transfer itself). The synchronised
// step is the median rank's step; a step is slow when its synchronised time exceeds the median by
// `threshold_s`, and a rank's own time is slow when it exceeds the median synchronised own time
// (the pace of the job) by the same threshold.
struct StepMatrix {
  size_t ranks = 0, rows = 0;
  std::vector<int64_t> step;            // step number per row
  std::vector<double> own, coll, wait;  // rows × ranks
  std::vector<double> stall;            // rows × ranks: checkpoint + eval time
  std::vector<double> sync_s;           // per row: median duration over ranks
  std::vector<double> sync_own_s;       // per row: max own time over ranks
  double sync_p50 = 0, sync_own_p50 = 0, threshold_s = 0;
  double wall_p50 = 0;  // median over rows of the longest rank's step: the job's wall-clock step
  bool have_coll = false;
  double at(const std::vector<double>& m, size_t k, size_t r) const { return m[k * ranks + r]; }
  bool step_slow(size_t k) const { return sync_s[k] - sync_p50 >= threshold_s; }
  bool own_slow(size_t k, size_t r) const { return at(own, k, r) - sync_own_p50 >= threshold_s; }
};
StepMatrix step_matrix(const std::vector<RankTrace>& traces, const AnalyzeOptions& o);

// analyzer_straggler.cc: the rank the others wait for, every step (consistent) or on the slow
// steps only (tail). At most one verdict.
void check_stragglers(const std::vector<RankTrace>& traces, const StepMatrix& m, Report& rep);

// analyzer_ranks.cc: per-rank table, scale model, stragglers, collective transfer.
void check_ranks(const std::vector<RankTrace>& traces, const AnalyzeOptions& o, Report& rep);
// analyzer_ranks.cc: tokens, pageable copies.
void check_correlations(const std::vector<RankTrace>& traces, const AnalyzeOptions& o, Report& rep);
// analyzer_gpu.cc: GPU utilisation per step, GPU idle waiting for the host, exposed communication.
void check_gpu(const std::vector<RankTrace>& traces, const AnalyzeOptions& o, Report& rep);
// analyzer_order.cc: verdicts below their minimum share become notes; causes explain symptoms;
// the final order (hung, then by impact, each explained or refining verdict after its cause).
void order_verdicts(Report& rep);

}  // namespace ckpt::profile::detail
