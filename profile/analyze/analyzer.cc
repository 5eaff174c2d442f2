#include "profile/analyze/analyzer.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "profile/analyze/analyzer_internal.h"
#include "profile/analyze/series_stats.h"

namespace ckpt::profile {

namespace {

using detail::fmt;
using detail::named_sum;
using detail::r4;
using detail::r6;
using nlohmann::json;

// --- 1. liveness ---------------------------------------------------------------------------------
void check_liveness(const std::vector<RankTrace>& traces, Report& rep) {
  std::vector<int> hung_ranks;
  json per_rank = json::array();
  double worst_gap = 0, worst_alive = 0;
  int worst_rank = -1;
  for (const auto& t : traces) {
    if (t.steps.empty()) continue;
    std::vector<double> d;
    for (const auto& s : t.steps) d.push_back(s.duration_s);
    double p50 = percentile(d, 0.5);
    double dmax = *std::max_element(d.begin(), d.end());
    const StepRecord& last = t.steps.back();
    double tail = std::max(0.0, t.end_s - (last.start_s + last.duration_s));
    rep.liveness.tail_gap_s = std::max(rep.liveness.tail_gap_s, tail);
    for (size_t i = 1; i < t.steps.size(); ++i) {
      double gap = t.steps[i].start_s - (t.steps[i - 1].start_s + t.steps[i - 1].duration_s);
      rep.liveness.max_gap_s = std::max(rep.liveness.max_gap_s, gap);
    }
    rep.liveness.max_gap_s = std::max(rep.liveness.max_gap_s, dmax);
    // Hung: alive (sampler lines, trailing events) far longer after the last step than any step
    // ever took. The 1 s floor keeps the recorder's 100 ms sampling granularity out of it.
    if (tail >= 10 * p50 && tail >= 1.0 && tail > dmax && !t.clean_end) {
      hung_ranks.push_back(t.rank);
      json r = {{"rank", t.rank},
                {"last_step", last.step},
                {"seconds_since_last_step", r4(tail)},
                {"step_time_p50_s", r6(p50)}};
      if (!t.cpu.empty() && t.cpu.back().phase >= 0 && t.cpu.back().phase < kNumPhases) {
        r["stuck_in_phase"] = phase_name(static_cast<Phase>(t.cpu.back().phase));
        r["stuck_in_step"] = t.cpu.back().step;
      }
      per_rank.push_back(r);
      if (tail > worst_gap) {
        worst_gap = tail;
        worst_alive = t.end_s;
        worst_rank = t.rank;
      }
    }
    // Steadiness: the step rate of the second half against the first.
    if (t.steps.size() >= 8) {
      size_t h = t.steps.size() / 2;
      double first = t.steps[h - 1].start_s + t.steps[h - 1].duration_s - t.steps[0].start_s;
      double second = last.start_s + last.duration_s - t.steps[h].start_s;
      if (first > 0 && second > 0) {
        double ratio = (double(t.steps.size() - h) / second) / (double(h) / first);
        if (std::fabs(ratio - 1) > std::fabs(rep.liveness.rate_ratio - 1)) {
          rep.liveness.rate_ratio = ratio;
        }
      }
    }
  }
  rep.liveness.steady = hung_ranks.empty() && rep.liveness.rate_ratio > 0.67;
  if (hung_ranks.empty()) return;
  // A rank stuck outside a collective is the one the others wait for: name it.
  for (const auto& r : per_rank) {
    if (r.contains("stuck_in_phase") && r["stuck_in_phase"] != "collective") {
      worst_rank = r["rank"].get<int>();
      break;
    }
  }
  Verdict v;
  v.set(VerdictId::kHung);
  // The share of the rank's traced life spent after its last step. `hung` leads whatever its
  // impact (analyzer_order.cc): a hang has a different fix, rule it out before anything else.
  v.set_impact(worst_gap, worst_alive);
  v.rank = worst_rank;
  v.confidence = std::min(1.0, 0.6 + 0.4 * double(hung_ranks.size()) / double(traces.size()));
  v.evidence = {{"hung_ranks", hung_ranks}, {"ranks", per_rank}};
  v.summary = fmt("no step completed for %.1f s after the last one (%.0f of the ranks)", worst_gap,
                  double(hung_ranks.size()));
  rep.verdicts.push_back(v);
}

// Per step, in [0, 1]: GPU busy / step time on GPU traces, else the share of the step the host did
// not spend waiting for data.
std::vector<double> utilisation_of(const RankTrace& t) {
  std::vector<double> u;
  u.reserve(t.steps.size());
  for (const auto& s : t.steps) {
    double d = s.duration_s > 0 ? s.duration_s : 1;
    double v = t.has_gpu ? s.gpu.busy_s / d : 1.0 - s.phase_s[index(Phase::kDataWait)] / d;
    u.push_back(std::clamp(v, 0.0, 1.0));
  }
  return u;
}

void summarise_utilisation(const std::vector<RankTrace>& traces, Report& rep) {
  Utilisation& u = rep.utilisation;
  bool gpu = false;
  for (const auto& t : traces) gpu |= t.has_gpu;
  u.source = gpu ? "gpu_busy" : "host_not_waiting_for_data";
  std::vector<double> all;
  for (size_t r = 0; r < traces.size(); ++r) {
    if (gpu && !traces[r].has_gpu) continue;
    auto v = utilisation_of(traces[r]);
    if (r < rep.series.size()) rep.series[r].utilisation = v;
    all.insert(all.end(), v.begin(), v.end());
  }
  if (all.empty()) return;
  u.steps = all.size();
  u.mean = r4(mean_of(all));
  u.p10 = r4(percentile(all, 0.1));
  u.p50 = r4(percentile(all, 0.5));
  u.p90 = r4(percentile(all, 0.9));
  u.min = r4(*std::min_element(all.begin(), all.end()));
  u.max = r4(*std::max_element(all.begin(), all.end()));
  for (double x : all) u.low_steps += x < 0.5 * u.p50;
}

// --- 2. shape ------------------------------------------------------------------------------------
// The strongest periodic structure over every rank and series, by the detectors' confidence.
struct BestPeriod {
  Periodicity p;
  const RankTrace* t = nullptr;
  const char* series = "";
  const char* method = "";
};

// The two-level detector on the last 8192 steps at most: a period of ≤ 64 steps shows there, and
// 10^6-step series stay O(window × lags). Spike indices are shifted back to the whole series.
Periodicity two_level_tail(const std::vector<double>& x, double min_excess) {
  constexpr size_t kWindow = 8192;
  if (x.size() <= kWindow) return detect_two_level_period(x, min_excess);
  size_t off = x.size() - kWindow;
  Periodicity p = detect_two_level_period(
      std::vector<double>(x.begin() + static_cast<std::ptrdiff_t>(off), x.end()), min_excess);
  for (size_t& i : p.spikes) i += off;
  return p;
}

BestPeriod strongest_period(const std::vector<RankTrace>& traces) {
  BestPeriod best;
  for (const auto& t : traces) {
    if (t.steps.size() < 6) continue;
    std::vector<double> d, w, ck, ev;  // ck, ev: annotated stall phases (a save every K steps)
    for (const auto& s : t.steps) {
      d.push_back(s.duration_s);
      w.push_back(s.phase_s[index(Phase::kDataWait)]);
      ck.push_back(s.phase_s[index(Phase::kCheckpoint)]);
      ev.push_back(s.phase_s[index(Phase::kEval)]);
    }
    double p50 = percentile(d, 0.5);
    std::vector<double> idle;  // 1 − utilisation: high is the stall
    for (double u : utilisation_of(t)) idle.push_back(1.0 - u);
    struct Candidate {
      Periodicity p;
      const char* series;
      const char* method;
    } cands[] = {
        {detect_periodic_spikes(d, 0.25 * p50), "step_time", "spikes over the rolling median"},
        {detect_periodic_spikes(w, 0.20 * p50), "data_wait", "spikes over the rolling median"},
        {detect_periodic_spikes(ck, 0.20 * p50), "checkpoint", "spikes over the rolling median"},
        {detect_periodic_spikes(ev, 0.20 * p50), "eval", "spikes over the rolling median"},
        {two_level_tail(w, 0.20 * p50), "data_wait", "two-level autocorrelation"},
        {two_level_tail(idle, 0.20), "utilisation", "two-level autocorrelation"}};
    for (const auto& c : cands) {
      if (c.p.found && c.p.confidence > best.p.confidence) best = {c.p, &t, c.series, c.method};
    }
  }
  return best;
}

// The period scan (series_stats.h) on every rank's step time: a sawtooth or alternation the spike
// and two-level detectors miss. The rank whose fold has the largest amplitude wins.
struct ScanPick {
  PeriodScan scan;
  const RankTrace* t = nullptr;
};

std::vector<int64_t> step_numbers(const RankTrace& t) {
  std::vector<int64_t> n;
  n.reserve(t.steps.size());
  bool increasing = true;
  for (size_t i = 0; i < t.steps.size(); ++i) {
    increasing &= i == 0 || t.steps[i].step > t.steps[i - 1].step;
    n.push_back(t.steps[i].step);
  }
  // Captures that repeat step numbers: fold by position instead.
  if (!increasing) {
    for (size_t i = 0; i < n.size(); ++i) n[i] = static_cast<int64_t>(i);
  }
  return n;
}

ScanPick strongest_scan(const std::vector<RankTrace>& traces, uint64_t seed) {
  ScanPick best;
  double best_rel = 0;
  for (const auto& t : traces) {
    if (t.steps.size() < 6) continue;
    std::vector<double> d;
    for (const auto& s : t.steps) d.push_back(s.duration_s);
    double p50 = percentile(d, 0.5);
    PeriodScan sc = scan_period(d, step_numbers(t), 0.25 * p50, seed);
    double rel = p50 > 0 ? sc.amplitude / p50 : 0;
    if (sc.found && rel > best_rel) {
      best_rel = rel;
      best = {std::move(sc), &t};
    }
  }
  return best;
}

// Seconds of phase p in each step; kOther is the unattributed rest.
std::vector<double> phase_series(const RankTrace& t, int p) {
  std::vector<double> x;
  x.reserve(t.steps.size());
  for (const auto& s : t.steps) {
    x.push_back(p == index(Phase::kOther) ? std::max(0.0, s.duration_s - named_sum(s))
                                          : s.phase_s[p]);
  }
  return x;
}

// The phases a longer batch lengthens. Unattributed time is not among them: it may be GC, logging
// or a host sync as well.
bool is_compute(int p) {
  return p == index(Phase::kForward) || p == index(Phase::kBackward) ||
         p == index(Phase::kOptimizer);
}

// A phase that is periodic while the step time is not (the period is hidden by overlap, or too
// small to matter): a note, from the first rank that has one.
void note_phase_periods(const std::vector<RankTrace>& traces, const AnalyzeOptions& o,
                        Report& rep) {
  for (const auto& t : traces) {
    if (t.steps.size() < 6) continue;
    std::vector<double> d;
    for (const auto& s : t.steps) d.push_back(s.duration_s);
    double p50 = percentile(d, 0.5);
    auto pos = step_numbers(t);
    bool any = false;
    for (int p = 0; p < kNumPhases; ++p) {
      PeriodScan sc = scan_period(phase_series(t, p), pos, 0.2 * p50, o.seed);
      if (!sc.found) continue;
      any = true;
      rep.notes.push_back(std::string(p == index(Phase::kOther)
                                          ? "unattributed time"
                                          : phase_name(static_cast<Phase>(p))) +
                          " on rank " + std::to_string(t.rank) + " repeats every " +
                          std::to_string(sc.period_steps) + " steps " +
                          fmt("(amplitude %.3g s, p = %.3g) but the step time does not: no stall",
                              sc.amplitude, sc.p_value));
    }
    if (any) return;
  }
}

void check_periodicity(const std::vector<RankTrace>& traces, const AnalyzeOptions& o, Report& rep) {
  BestPeriod best = strongest_period(traces);
  const RankTrace* t = best.t;
  std::vector<size_t> stalled;
  int64_t period = 0;
  json detector;
  if (t != nullptr) {
    stalled = best.p.spikes;
    period = best.p.period_steps;
    detector = {{"series", best.series},
                {"method", best.method},
                {"gap_agreement", r4(best.p.gap_agreement)},
                {"coverage", r4(best.p.coverage)}};
  } else {
    ScanPick sp = strongest_scan(traces, o.seed);
    if (sp.t == nullptr) {
      note_phase_periods(traces, o, rep);
      return;
    }
    t = sp.t;
    stalled = sp.scan.high;
    period = sp.scan.period_steps;
    detector = {{"series", "step_time"},
                {"method", "period scan (fold by step mod K, permutation test)"},
                {"strength", r4(sp.scan.strength)},
                {"p_value", r4(sp.scan.p_value)},
                {"permutations", sp.scan.shuffles},
                {"amplitude_s", r6(sp.scan.amplitude)}};
    best.p.confidence = sp.scan.strength * (1 - sp.scan.p_value);
  }
  const auto& steps = t->steps;
  if (stalled.empty()) return;
  std::vector<bool> is_spike(steps.size(), false);
  for (size_t i : stalled) is_spike[i] = true;
  // The stall in seconds, measured: each stalled step's duration over the median of the others.
  std::vector<double> base_d;
  for (size_t i = 0; i < steps.size(); ++i) {
    if (!is_spike[i]) base_d.push_back(steps[i].duration_s);
  }
  double base = percentile(base_d, 0.5);
  double explained = 0, longest = 0, total_time = 0;
  for (size_t i : stalled) explained += std::max(0.0, steps[i].duration_s - base);
  for (const auto& s : steps) {
    total_time += s.duration_s;
    longest = std::max(longest, s.duration_s);
  }
  double mean_excess = explained / double(stalled.size());
  // Attribute the stall: which phase grows in the stalled steps compared with the others?
  std::array<std::vector<double>, kNumPhases> series, base_p;
  for (int p = 0; p < kNumPhases; ++p) series[p] = phase_series(*t, p);
  for (int p = 0; p < kNumPhases; ++p) {
    const auto& x = series[p];
    for (size_t i = 0; i < steps.size(); ++i) {
      if (!is_spike[i]) base_p[p].push_back(x[i]);
    }
  }
  PhaseTimes excess{};
  for (int p = 0; p < kNumPhases; ++p) {
    const auto& x = series[p];
    double med = percentile(base_p[p], 0.5);
    for (size_t i : stalled) excess[p] += x[i] - med;
  }
  int cause = index(Phase::kOther);
  for (int p = 0; p < kNumPhases; ++p) {
    if (excess[p] > excess[cause]) cause = p;
  }
  double total_excess = 0, compute_excess = 0;
  json carriers = json::object();
  for (int p = 0; p < kNumPhases; ++p) total_excess += std::max(0.0, excess[p]);
  for (int p = 0; p < kNumPhases; ++p) {
    if (excess[p] <= 0 || total_excess <= 0) continue;
    carriers[p == index(Phase::kOther) ? "unattributed" : phase_name(static_cast<Phase>(p))] =
        r4(excess[p] / total_excess);
    if (is_compute(p)) compute_excess += excess[p];
  }
  std::string cause_name =
      cause == index(Phase::kOther) ? "unattributed" : phase_name(static_cast<Phase>(cause));
  bool compute_carries = total_excess > 0 && compute_excess / total_excess >= 0.5;
  // Every phase series, scanned on its own: which ones carry the period (and any that alternate
  // while the step time does not).
  json phase_periods = json::object();
  {
    auto pos = step_numbers(*t);
    std::vector<double> d;
    d.reserve(steps.size());
    for (const auto& s : steps) d.push_back(s.duration_s);
    double p50 = percentile(d, 0.5);
    for (int p = 0; p < kNumPhases; ++p) {
      PeriodScan sc = scan_period(series[p], pos, 0.2 * p50, o.seed);
      if (!sc.found) continue;
      phase_periods[p == index(Phase::kOther) ? "unattributed"
                                              : phase_name(static_cast<Phase>(p))] = {
          {"period_steps", sc.period_steps},
          {"p_value", r4(sc.p_value)},
          {"amplitude_s", r6(sc.amplitude)}};
    }
  }
  size_t per_period =
      std::max<size_t>(1, static_cast<size_t>(std::lround(double(stalled.size()) * double(period) /
                                                          double(steps.size()))));
  double span_s = steps[stalled.back()].start_s - steps[stalled.front()].start_s;
  double period_s = per_period == 1 && stalled.size() > 1
                        ? span_s / double(stalled.size() - 1)
                        : double(period) * (steps.back().start_s - steps.front().start_s) /
                              double(std::max<size_t>(1, steps.size() - 1));

  Verdict v;
  v.set(VerdictId::kPeriodicStall);
  v.period_steps = period;
  v.confidence = r4(best.p.confidence);
  v.set_impact(explained, total_time);
  v.evidence = detector;
  v.evidence.update(
      json{{"rank", t->rank},
           {"period_steps", period},
           {"period_s", r4(period_s)},
           {"stalled_steps", stalled.size()},
           {"stalled_per_period", per_period},
           {"first_stalled_step", steps[stalled.front()].step},
           {"mean_excess_s", r6(mean_excess)},
           {"longest_step_s", r6(longest)},
           {"cause", cause_name},
           {"cause_share", r4(total_excess > 0 ? std::max(0.0, excess[cause]) / total_excess : 0)},
           {"carried_by", compute_carries ? "compute" : cause_name},
           {"carriers", carriers},
           {"phase_periods", phase_periods}});
  std::string why = cause_name == "checkpoint"   ? "checkpoint saves"
                    : cause_name == "eval"       ? "evaluation"
                    : cause_name == "data_wait"  ? "the data loader (buffer refill)"
                    : cause_name == "collective" ? "the collective (waiting for another rank)"
                    : compute_carries ? "computation (forward/backward: longer batches in those "
                                        "steps?)"
                    : cause_name == "unattributed"
                        ? "time outside any named phase (GC? logging? annotate it)"
                        : cause_name;
  std::string when =
      period == 2 && per_period == 1
          ? "every other step (period " + fmt("%.3g s", period_s) + ") is"
          : "every " + std::to_string(period) + " steps (" + fmt("%.3g s", period_s) + ")" +
                (per_period == 1 ? " a step is" : " " + std::to_string(per_period) + " steps are");
  v.summary = when + " slower by " + fmt("%.3g s", mean_excess) + " (" +
              fmt("%.1f%% of the time", 100 * v.impact) + "), caused by " + why;
  rep.verdicts.push_back(v);
}

// --- 3. breakdown --------------------------------------------------------------------------------
void compute_breakdown(const std::vector<RankTrace>& traces, Report& rep) {
  double total = 0;
  PhaseTimes sum{};
  for (const auto& t : traces) {
    for (const auto& s : t.steps) {
      total += s.duration_s;
      for (int p = 0; p < kNumPhases; ++p) {
        if (p != index(Phase::kOther)) sum[p] += s.phase_s[p];
      }
    }
  }
  if (total <= 0) return;
  double named = 0;
  for (int p = 0; p < kNumPhases; ++p) {
    rep.breakdown[p] = r4(sum[p] / total);
    named += sum[p];
  }
  rep.breakdown[index(Phase::kOther)] = r4(std::max(0.0, 1.0 - named / total));
}

// What a trace without host CPU samples can say about CPU-bound vs I/O-bound loading: the
// iterator class tells where the loading runs; the rest needs CPU samples.
std::string loader_note(const std::vector<RankTrace>& traces) {
  std::string iter;
  for (const auto& t : traces) {
    if (!t.loader_iter.empty()) iter = t.loader_iter;
  }
  const char* record =
      "to tell CPU-bound decode from I/O-bound loading, record host CPU samples with the ckpt "
      "recorder (StepRecorder with its CPU sampler: host busy, iowait and process CPU every "
      "100 ms), or run `mpstat 1` and `iostat -x 1` beside the job";
  if (iter == "_SingleProcessDataLoaderIter") {
    return std::string(
               "input-bound with num_workers=0 (_SingleProcessDataLoaderIter): loading "
               "runs in the training process itself, so every batch's decode and read "
               "time is on the step's critical path; use DataLoader workers. ") +
           record;
  }
  if (iter == "_MultiProcessingDataLoaderIter") {
    return std::string(
               "input-bound with DataLoader workers (_MultiProcessingDataLoaderIter): "
               "the workers do not keep up; the trace does not show whether they are "
               "busy (CPU-bound) or blocked on storage (I/O-bound): ") +
           record;
  }
  return std::string(
             "input-bound, but no host CPU samples: cannot tell CPU-bound decode from "
             "I/O-bound loading; ") +
         record;
}

void check_input(const std::vector<RankTrace>& traces, const AnalyzeOptions& o, Report& rep) {
  double dw = rep.breakdown[index(Phase::kDataWait)];
  if (dw < o.input_moderate) return;
  size_t waiting = 0, n = 0;
  double wait_s = 0, step_s = 0;
  std::vector<double> waits;
  for (const auto& t : traces) {
    for (const auto& s : t.steps) {
      ++n;
      double w = s.phase_s[index(Phase::kDataWait)];
      wait_s += w;
      step_s += s.duration_s;
      waits.push_back(w);
      if (s.duration_s > 0 && w / s.duration_s >= o.input_moderate) ++waiting;
    }
  }
  double consistent = n ? double(waiting) / double(n) : 0;
  bool high = dw >= o.input_high;
  if (!high && consistent < o.input_steps_moderate) {
    // The wait is in a few steps (an OS hiccup, one slow batch), not in the typical step: a
    // starved loader makes most steps wait. Said, not a verdict.
    rep.notes.push_back(
        fmt("%.1f%% of step time waits for data, but only %.0f%% of steps wait 5%% or more of "
            "their time (median wait %.3g s): occasional slow batches, not a starved loader "
            "(input_bound needs a third of the steps waiting, or 20%% of the time)",
            100 * dw, 100 * consistent, percentile(waits, 0.5)));
    return;
  }
  Verdict v;
  v.set(VerdictId::kInputBound);
  v.set_impact(wait_s, step_s);
  v.confidence = r4(std::min(1.0, (high ? 0.6 : 0.4) + 0.4 * consistent));
  v.evidence = {{"data_wait_fraction", dw},
                {"level", high ? "high" : "moderate"},
                {"steps_waiting_fraction", r4(consistent)},
                {"data_wait_p50_s", r6(percentile(waits, 0.5))},
                {"thresholds", {{"moderate", o.input_moderate}, {"high", o.input_high}}}};
  if (rep.measured_budget) {
    const Budget& b = *rep.measured_budget;
    v.evidence["budget_model"] = {{"per_gpu_rate", r4(b.per_gpu_rate)},
                                  {"loader_rate_observed", r4(b.loader_cap)},
                                  {"predicted_utilisation", r4(b.predicted_utilisation)},
                                  {"observed_utilisation", r4(1.0 - dw)},
                                  {"note", "model, not a measurement"}};
  }
  v.summary = fmt("%.1f%% of step time waits for data", 100 * dw) +
              (high ? " (highly input-bound: >= 20%)" : " (moderately input-bound: >= 5%)");
  rep.verdicts.push_back(v);

  // Host CPU while waiting: saturated cores mean decode/augment is the limit; idle cores mean
  // the loader waits on storage. iowait is kept apart because some monitors count it as busy.
  std::vector<double> busy, iowait, proc;
  for (const auto& t : traces) {
    for (const auto& c : t.cpu) {
      busy.push_back(c.host_busy);
      iowait.push_back(c.host_iowait);
      proc.push_back(c.process_busy);
    }
  }
  if (busy.size() < 3) {
    rep.notes.push_back(loader_note(traces));
    return;
  }
  double mb = mean_of(busy), mi = mean_of(iowait), mp = mean_of(proc);
  Verdict c;
  c.set_impact(wait_s, step_s);
  c.refines = VerdictId::kInputBound;  // placed right after it (analyzer_order.cc)
  c.evidence = {{"host_cpu_busy_mean", r4(mb)}, {"host_cpu_busy_p90", r4(percentile(busy, 0.9))},
                {"host_iowait_mean", r4(mi)},   {"process_cpu_mean", r4(mp)},
                {"samples", busy.size()},       {"data_wait_fraction", dw}};
  if (mb >= o.cpu_saturated) {
    c.set(VerdictId::kCpuBoundLoader);
    c.confidence = r4(std::min(1.0, 0.5 + (mb - o.cpu_saturated) / (1 - o.cpu_saturated) * 0.5));
    c.summary =
        fmt("host CPUs %.0f%% busy while waiting for data: decode/augment is the limit", 100 * mb);
  } else if (mb <= o.cpu_idle) {
    c.set(VerdictId::kIoBoundLoader);
    c.confidence = r4(std::min(1.0, 0.5 + (o.cpu_idle - mb) / o.cpu_idle * 0.5));
    c.summary =
        fmt("host CPUs only %.0f%% busy (iowait %.0f%%) while waiting for data: storage "
            "or metadata latency is the limit",
            100 * mb, 100 * mi);
  } else {
    rep.notes.push_back(
        fmt("host CPU %.0f%% busy while input-bound: between the CPU-bound and "
            "I/O-bound thresholds; check per-worker CPU",
            100 * mb));
    return;
  }
  rep.verdicts.push_back(c);
}

}  // namespace

Result<Report> analyze(const std::vector<RankTrace>& traces, const AnalyzeOptions& o) {
  Report rep;
  rep.ranks = static_cast<int>(traces.size());
  std::vector<double> all;
  int64_t samples = 0;
  double busy_time = 0, total_time = 0;
  size_t n = 0;
  for (const auto& t : traces) {
    rep.steps = std::max<int64_t>(rep.steps, static_cast<int64_t>(t.steps.size()));
    Report::Series s{t.rank, {}, {}, {}, {}, {}};
    for (const auto& r : t.steps) {
      all.push_back(r.duration_s);
      s.step.push_back(r.step);
      s.step_s.push_back(r.duration_s);
      s.data_wait_s.push_back(r.phase_s[index(Phase::kDataWait)]);
      samples += r.samples;
      total_time += r.duration_s;
      busy_time += r.duration_s - r.phase_s[index(Phase::kDataWait)];
      ++n;
    }
    rep.series.push_back(std::move(s));
  }
  if (all.empty()) {
    std::string names;
    for (const auto& t : traces) names += (names.empty() ? "" : ", ") + t.source;
    return corrupt((names.empty() ? std::string("no input") : names) +
                   ": no step records to analyse");
  }
  rep.mean = mean_of(all);
  rep.p50 = percentile(all, 0.5);
  rep.p99 = percentile(all, 0.99);
  if (samples > 0 && busy_time > 0 && total_time > 0) {
    // From measured data: what one GPU consumes when fed, and what the loader delivered. When the
    // job is input-bound the delivered rate is the loader's cap; otherwise a lower bound of it.
    double per_step_samples = double(samples) / double(n);
    double per_gpu = double(samples) / busy_time;
    double delivered = per_step_samples / (total_time / double(n)) * double(traces.size());
    auto b = budget_model(double(traces.size()), per_gpu, delivered);
    if (b.is_ok()) rep.measured_budget = *b;
  }

  summarise_utilisation(traces, rep);
  check_liveness(traces, rep);
  check_periodicity(traces, o, rep);
  compute_breakdown(traces, rep);
  check_input(traces, o, rep);
  detail::check_ranks(traces, o, rep);
  detail::check_gpu(traces, o, rep);
  detail::check_correlations(traces, o, rep);

  // compute_bound only when nothing else owns the time.
  static const VerdictId kOwners[] = {VerdictId::kHung, VerdictId::kInputBound,
                                      VerdictId::kStraggler, VerdictId::kPeriodicStall,
                                      VerdictId::kCollectiveBound};
  bool owned = false;
  for (const auto& v : rep.verdicts) {
    for (VerdictId id : kOwners) owned |= v.kind == id;
  }
  double compute = rep.breakdown[index(Phase::kForward)] + rep.breakdown[index(Phase::kBackward)] +
                   rep.breakdown[index(Phase::kOptimizer)] + rep.breakdown[index(Phase::kOther)];
  if (!owned && compute >= o.compute_bound) {
    Verdict v;
    v.set(VerdictId::kComputeBound);
    v.set_impact(compute * total_time, total_time);
    v.confidence = r4(compute);
    v.evidence = {{"compute_fraction", r4(compute)},
                  {"data_wait_fraction", rep.breakdown[index(Phase::kDataWait)]},
                  {"collective_fraction", rep.breakdown[index(Phase::kCollective)]}};
    v.summary = fmt("%.1f%% of step time is computation (forward, backward, optimizer, other)",
                    100 * compute);
    rep.verdicts.push_back(v);
  } else if (!owned) {
    rep.notes.push_back("no single cause owns the step time; see the breakdown");
  }
  for (const auto& t : traces) {
    for (const auto& n : t.layout_notes) rep.notes.push_back(n);
  }
  detail::order_verdicts(rep);
  return rep;
}

}  // namespace ckpt::profile
