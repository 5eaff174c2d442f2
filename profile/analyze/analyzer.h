// The step analyzer: from RankTraces to findings, in the expert's order (DOMAIN.md):
// liveness → shape (periodicity) → breakdown → per-rank distribution and scale → correlations
// (host CPU, every-K-step stalls, tokens, pageable copies).
//
// Each finding is a Verdict with an id from verdict_catalog.h, a confidence in [0, 1], evidence
// numbers, and an impact: measured seconds it explains over the measured seconds it is a share of
// (impact_s / of_s, never above 1, both from the trace). A verdict whose impact is below its
// minimum share (verdict_min_share) becomes a note. The order (analyzer_order.cc): `hung` first,
// then by impact, except that a verdict another one explains (input wait → GPU idle, straggler →
// collective wait, a loader refill → periodic stall, …) comes right after its cause and names it
// (explained_by), and a refinement (cpu_bound_loader of input_bound) right after what it refines.
// A Report owns its data; analyze() is a pure function of its input and thread-safe.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "ckpt/base/status.h"
#include "profile/analyze/budget.h"
#include "profile/analyze/verdict_catalog.h"
#include "profile/recorder/step_record.h"

namespace ckpt::profile {

struct AnalyzeOptions {
  double input_moderate = 0.05;  // data wait ≥ 5% of step time: moderately input-bound
  double input_high = 0.20;      // ≥ 20%: highly input-bound (TF Profiler's thresholds)
  // Below input_high, at least this share of the steps must wait ≥ input_moderate of their own
  // time: a few slow batches are not a starved loader.
  double input_steps_moderate = 1.0 / 3.0;
  double slow_factor = 1.5;  // a step is slow when it takes ≥ 1.5 × its rank's median
  double collective_bound = 0.10;
  double compute_bound = 0.80;
  double cpu_saturated = 0.85;  // host busy (iowait excluded) at or above: CPU-bound loader
  double cpu_idle = 0.50;       // at or below: the loader waits on I/O
  uint64_t seed = 25;           // the period scan's permutation test (deterministic)
};

struct Verdict {
  VerdictId kind = VerdictId::kHung;
  std::string id() const { return verdict_name(kind); }  // the output name ("input_bound")
  void set(VerdictId k) { kind = k; }
  double confidence = 0;
  double impact = 0;    // impact_s / of_s: the share of measured time explained; orders the list
  double impact_s = 0;  // measured seconds the verdict explains ...
  double of_s = 0;      // ... out of these measured seconds (step time of the ranks it covers)
  void set_impact(double explained_s, double base_s) {
    impact_s = explained_s;
    of_s = base_s;
    impact = base_s > 0 ? explained_s / base_s : 0;
  }
  std::optional<VerdictId> explained_by;  // the verdict above that causes this one
  double explained_share = 0;             // the share of this one that cause accounts for
  std::optional<VerdictId> refines;       // a more specific reading of that verdict
  nlohmann::json evidence = nlohmann::json::object();
  std::optional<int> rank;              // straggler, hung
  std::optional<int64_t> period_steps;  // periodic_stall
  std::string summary;                  // one line with the key numbers
};

struct RankStats {
  int rank = 0;
  size_t steps = 0;
  double mean = 0, p50 = 0, p90 = 0, p99 = 0, p99_over_mean = 0;
  double slow_fraction = 0;  // steps ≥ slow_factor × p50
  double collective_p50 = 0;
  double data_wait_fraction = 0;
  // The rank's own quantities (never barrier-equalised), over the steps all ranks hold:
  double own_p50 = 0, own_p99 = 0;     // step start → entering the collective
  double wait_p50 = 0, wait_mean = 0;  // time in the collective waiting for the others
  double own_slow_fraction = 0;        // steps whose own time alone makes the step slow
  double last_fraction = 0;            // steps where this rank arrived last at the collective
  double gpu_busy_fraction = -1;       // GPU busy / step time over its steps; -1: no GPU events
  double gpu_comm_fraction = -1;       // NCCL kernels / step time; -1: no GPU events
};

// A synchronous step is slow when any rank's own time is slow. The model separates slowness that
// hits many ranks at once (a shared cause: the same loader refill, a checkpoint barrier; it does
// not grow with N) from each rank's independent tail p_r, and predicts the slow fraction as
// p_common + (1 − p_common)(1 − Π(1 − p_r)); at k×N ranks each rank's tail is the geometric mean
// p̄. The prediction is checked against the observed fraction of slow synchronised steps.
struct ScaleModel {
  int ranks = 0;
  double p_slow = 0;             // per-rank probability of a slow own time (mean over ranks)
  double observed_any_slow = 0;  // fraction of common steps that were slow (synchronised time)
  double predicted_now = 0;      // the model at N
  double predicted_2x = 0;
  double predicted_4x = 0;
  double p_common = 0;       // fraction of steps slow on at least half the ranks at once
  double p_independent = 0;  // p̄: the per-rank independent tail
  double threshold_s = 0;    // slow: more than this above the median
  size_t steps_compared = 0;
  double tolerance = 0;  // agreement: |predicted − observed| ≤ 2 binomial s.e. + 1 step
  bool agrees = true;
};

// The utilisation curve's summary: GPU busy / step time per step when the trace has GPU events,
// else the host's 1 − data-wait share (what a dashboard shows as "utilisation" on a CPU job).
struct Utilisation {
  std::string source;  // "gpu_busy" or "host_not_waiting_for_data"
  double mean = 0, p10 = 0, p50 = 0, p90 = 0, min = 0, max = 0;
  size_t steps = 0;
  size_t low_steps = 0;  // steps below half the median utilisation
  // GPU traces only (fractions of step time, over all ranks' steps):
  double gpu_idle = 0, gpu_idle_in_data_wait = 0, gpu_comm = 0, gpu_exposed_comm = 0;
  double gpu_pageable_h2d = 0, host_sync = 0;
};

struct Liveness {
  bool steady = true;
  double steps_per_s = 0;
  double rate_ratio = 1;  // step rate in the second half / first half
  double max_gap_s = 0;   // longest step or pause between steps
  double tail_gap_s = 0;  // time alive after the last completed step (largest over ranks)
};

struct Report {
  int ranks = 0;
  int64_t steps = 0;                  // step records of the longest rank
  double mean = 0, p50 = 0, p99 = 0;  // step time over all ranks' steps, seconds
  PhaseTimes breakdown{};             // fraction of step time per phase; other = unattributed
  Liveness liveness;
  std::vector<RankStats> per_rank;
  ScaleModel scale;
  std::optional<Budget> measured_budget;  // from samples per step, when recorded
  std::vector<Verdict> verdicts;          // primary first
  std::vector<std::string> notes;         // what could not be checked, and why
  Utilisation utilisation;
  // The series the SVG draws, per rank (step number, step time, data wait, utilisation, own time).
  struct Series {
    int rank;
    std::vector<int64_t> step;
    std::vector<double> step_s, data_wait_s;
    std::vector<double> utilisation;  // per step, in [0, 1] (see Utilisation::source)
    std::vector<double> own_s;        // per step: step start → entering the collective
  };
  std::vector<Series> series;
};

// On failure: Corrupt when no rank has a single step record (nothing to analyse).
Result<Report> analyze(const std::vector<RankTrace>& traces, const AnalyzeOptions& options = {});

}  // namespace ckpt::profile
