#include "profile/analyzer.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "profile/analyzer_internal.h"
#include "profile/series_stats.h"

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
  double worst_gap = 0;
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
  v.impact = 2.0;  // always first: a hang has a different fix, rule it out before anything else
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

void check_periodicity(const std::vector<RankTrace>& traces, Report& rep) {
  BestPeriod best = strongest_period(traces);
  if (best.t == nullptr) return;
  const auto& steps = best.t->steps;
  const auto& spikes = best.p.spikes;
  std::vector<bool> is_spike(steps.size(), false);
  for (size_t i : spikes) is_spike[i] = true;
  // Attribute the stall: which phase grows in the spike steps compared with the others?
  PhaseTimes excess{};
  double unattributed_excess = 0;
  std::vector<double> base_other;
  std::array<std::vector<double>, kNumPhases> base;
  for (size_t i = 0; i < steps.size(); ++i) {
    if (is_spike[i]) continue;
    for (int p = 0; p < kNumPhases; ++p) base[p].push_back(steps[i].phase_s[p]);
    base_other.push_back(steps[i].duration_s - named_sum(steps[i]));
  }
  PhaseTimes med{};
  for (int p = 0; p < kNumPhases; ++p) med[p] = percentile(base[p], 0.5);
  double med_other = percentile(base_other, 0.5);
  for (size_t i : spikes) {
    for (int p = 0; p < kNumPhases; ++p) excess[p] += steps[i].phase_s[p] - med[p];
    unattributed_excess += steps[i].duration_s - named_sum(steps[i]) - med_other;
  }
  int cause = -1;
  double cause_excess = unattributed_excess;
  for (int p = 0; p < kNumPhases; ++p) {
    if (p == index(Phase::kOther)) continue;
    if (excess[p] > cause_excess) {
      cause_excess = excess[p];
      cause = p;
    }
  }
  double total_excess = 0;
  for (int p = 0; p < kNumPhases; ++p) total_excess += std::max(0.0, excess[p]);
  total_excess += std::max(0.0, unattributed_excess);
  std::string cause_name = cause < 0 ? "unattributed" : phase_name(static_cast<Phase>(cause));
  double span_s = steps[spikes.back()].start_s - steps[spikes.front()].start_s;
  double period_s = spikes.size() > 1 ? span_s / double(spikes.size() - 1) : 0;
  double total_time = 0;
  for (const auto& s : steps) total_time += s.duration_s;

  Verdict v;
  v.set(VerdictId::kPeriodicStall);
  v.period_steps = best.p.period_steps;
  v.confidence = r4(best.p.confidence);
  v.impact = total_time > 0 ? double(spikes.size()) * best.p.mean_excess / total_time : 0;
  v.evidence = {
      {"series", best.series},
      {"method", best.method},
      {"rank", best.t->rank},
      {"period_steps", best.p.period_steps},
      {"period_s", r4(period_s)},
      {"stalled_steps", spikes.size()},
      {"first_stalled_step", steps[spikes.front()].step},
      {"mean_excess_s", r6(best.p.mean_excess)},
      {"gap_agreement", r4(best.p.gap_agreement)},
      {"coverage", r4(best.p.coverage)},
      {"cause", cause_name},
      {"cause_share", r4(total_excess > 0 ? std::max(0.0, cause_excess) / total_excess : 0)}};
  std::string why = cause_name == "checkpoint"  ? "checkpoint saves"
                    : cause_name == "eval"      ? "evaluation"
                    : cause_name == "data_wait" ? "the data loader (buffer refill)"
                    : cause_name == "unattributed"
                        ? "time outside any named phase (GC? logging? annotate it)"
                        : cause_name;
  v.summary = "every " + std::to_string(best.p.period_steps) + " steps (" +
              fmt("%.3g s", period_s) + ") a step is slower by " +
              fmt("%.3g s", best.p.mean_excess) + ", caused by " + why;
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
  std::vector<double> waits;
  for (const auto& t : traces) {
    for (const auto& s : t.steps) {
      ++n;
      double w = s.phase_s[index(Phase::kDataWait)];
      waits.push_back(w);
      if (s.duration_s > 0 && w / s.duration_s >= o.input_moderate) ++waiting;
    }
  }
  double consistent = n ? double(waiting) / double(n) : 0;
  bool high = dw >= o.input_high;
  Verdict v;
  v.set(VerdictId::kInputBound);
  v.impact = dw;
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
  c.impact = dw - 1e-9;  // right after input_bound: it refines it
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
  check_periodicity(traces, rep);
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
    v.impact = compute;
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
  std::stable_sort(rep.verdicts.begin(), rep.verdicts.end(),
                   [](const Verdict& a, const Verdict& b) { return a.impact > b.impact; });
  return rep;
}

}  // namespace ckpt::profile
