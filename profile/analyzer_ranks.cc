// The analyzer's cross-rank and correlation checks (distribution, straggler, scale, collective
// transfer, tokens, pageable copies); analyzer.cc runs them in the expert's order.
#include <algorithm>
#include <cmath>
#include <map>

#include "profile/analyzer.h"
#include "profile/series_stats.h"

namespace ckpt::profile {

namespace {

using nlohmann::json;

double r4(double v) { return std::round(v * 1e4) / 1e4; }
double r6(double v) { return std::round(v * 1e6) / 1e6; }

std::string fmt(const char* f, double a, double b = 0, double c = 0) {
  char buf[256];
  std::snprintf(buf, sizeof buf, f, a, b, c);
  return buf;
}

double coll(const StepRecord& r) { return r.phase_s[index(Phase::kCollective)]; }
double compute_of(const StepRecord& r) {
  return std::max(0.0, r.duration_s - r.phase_s[index(Phase::kDataWait)] - coll(r));
}

// Steps present on every rank: row k holds, for each rank, the index of that step in its vector.
struct CommonSteps {
  size_t ranks = 0;
  std::vector<size_t> flat;  // rows × ranks
  size_t size() const { return ranks ? flat.size() / ranks : 0; }
  bool empty() const { return flat.empty(); }
  const size_t* row(size_t k) const { return flat.data() + k * ranks; }
};

CommonSteps common_steps(const std::vector<RankTrace>& traces) {
  CommonSteps out;
  out.ranks = traces.size();
  if (traces.empty()) return out;
  // The usual case, and the only one at 10^6 steps: every rank holds the same step sequence.
  bool same = true;
  for (const auto& t : traces) {
    same &= t.steps.size() == traces[0].steps.size();
    for (size_t i = 0; same && i < t.steps.size(); ++i) {
      same &= t.steps[i].step == traces[0].steps[i].step;
    }
  }
  if (same) {
    out.flat.resize(traces[0].steps.size() * traces.size());
    for (size_t i = 0; i < traces[0].steps.size(); ++i) {
      for (size_t r = 0; r < traces.size(); ++r) out.flat[i * traces.size() + r] = i;
    }
    return out;
  }
  std::map<int64_t, std::vector<size_t>> by_step;
  for (size_t r = 0; r < traces.size(); ++r) {
    for (size_t i = 0; i < traces[r].steps.size(); ++i) {
      auto& v = by_step[traces[r].steps[i].step];
      if (v.size() == r) v.push_back(i);  // first record of that step on this rank
    }
  }
  for (auto& [step, idx] : by_step) {
    if (idx.size() == traces.size()) out.flat.insert(out.flat.end(), idx.begin(), idx.end());
  }
  return out;
}

}  // namespace

void check_ranks(const std::vector<RankTrace>& traces, const AnalyzeOptions& o, Report& rep) {
  // --- 4. distribution --------------------------------------------------------------------------
  std::vector<double> p_slow;
  std::vector<double> rank_p50(traces.size(), 0);
  for (size_t r = 0; r < traces.size(); ++r) {
    const auto& t = traces[r];
    RankStats s;
    s.rank = t.rank;
    s.steps = t.steps.size();
    if (t.steps.empty()) {
      rep.per_rank.push_back(s);
      continue;
    }
    std::vector<double> d, c;
    double dw = 0, total = 0;
    for (const auto& x : t.steps) {
      d.push_back(x.duration_s);
      c.push_back(coll(x));
      dw += x.phase_s[index(Phase::kDataWait)];
      total += x.duration_s;
    }
    s.mean = mean_of(d);
    s.p50 = percentile(d, 0.5);
    s.p90 = percentile(d, 0.9);
    s.p99 = percentile(d, 0.99);
    s.p99_over_mean = s.mean > 0 ? s.p99 / s.mean : 0;
    size_t slow = 0;
    for (double x : d) slow += x >= o.slow_factor * s.p50;
    s.slow_fraction = double(slow) / double(d.size());
    s.collective_p50 = percentile(c, 0.5);
    s.data_wait_fraction = total > 0 ? dw / total : 0;
    rank_p50[r] = s.p50;
    p_slow.push_back(s.slow_fraction);
    rep.per_rank.push_back(s);
  }

  // --- scale: a synchronous step is slow when any rank is slow ----------------------------------
  auto common = common_steps(traces);
  ScaleModel& sc = rep.scale;
  sc.ranks = static_cast<int>(traces.size());
  sc.p_slow = mean_of(p_slow);
  auto predict = [&](double n) { return 1.0 - std::pow(1.0 - sc.p_slow, n); };
  sc.predicted_now = predict(sc.ranks);
  sc.predicted_2x = predict(2.0 * sc.ranks);
  sc.predicted_4x = predict(4.0 * sc.ranks);
  if (!common.empty()) {
    size_t any = 0;
    for (size_t k = 0; k < common.size(); ++k) {
      const size_t* idx = common.row(k);
      bool slow = false;
      for (size_t r = 0; r < traces.size(); ++r) {
        slow |= traces[r].steps[idx[r]].duration_s >= o.slow_factor * rank_p50[r];
      }
      any += slow;
    }
    sc.observed_any_slow = double(any) / double(common.size());
  }
  json scale = {{"p_slow_per_rank", r4(sc.p_slow)},
                {"predicted_slow_at_2x_ranks", r4(sc.predicted_2x)},
                {"predicted_slow_at_4x_ranks", r4(sc.predicted_4x)}};
  for (auto& v : rep.verdicts) {
    if (v.id == "periodic_stall") v.evidence["scale"] = scale;
  }

  double step_p50 = rep.p50;
  if (traces.size() < 2 || common.size() < 5 || step_p50 <= 0) {
    if (traces.size() >= 2) {
      rep.notes.push_back("fewer than 5 steps common to all ranks: straggler check skipped");
    }
  } else {
    // --- straggler: the rank the others wait for ------------------------------------------------
    // Inside a collective, waiting dominates: the rank that arrives last waits least. So the
    // straggler is the rank with the shortest collective time while the others' is long,
    // consistently. Without collectives, fall back to the rank with the longest compute.
    bool have_coll = false;
    for (const auto& t : traces) {
      for (const auto& s : t.steps) have_coll |= coll(s) > 0;
    }
    std::vector<size_t> count(traces.size(), 0);
    std::vector<std::vector<double>> gaps(traces.size());
    double transfer = 0, step_sum = 0;
    std::vector<double> v(traces.size());
    for (size_t k = 0; k < common.size(); ++k) {
      const size_t* idx = common.row(k);
      double mean_d = 0;
      for (size_t r = 0; r < traces.size(); ++r) {
        const auto& s = traces[r].steps[idx[r]];
        v[r] = have_coll ? coll(s) : compute_of(s);
        mean_d += s.duration_s;
      }
      mean_d /= double(traces.size());
      step_sum += mean_d;
      size_t pick = have_coll ? std::min_element(v.begin(), v.end()) - v.begin()
                              : std::max_element(v.begin(), v.end()) - v.begin();
      if (have_coll) transfer += v[pick];  // the min over ranks is the transfer itself
      std::vector<double> others;
      for (size_t r = 0; r < traces.size(); ++r) {
        if (r != pick) others.push_back(v[r]);
      }
      double gap = std::fabs(percentile(others, 0.5) - v[pick]);
      gaps[pick].push_back(gap);
      if (gap >= 0.05 * step_p50) ++count[pick];
    }
    size_t best = std::max_element(count.begin(), count.end()) - count.begin();
    double consistency = double(count[best]) / double(common.size());
    double gap_p50 = percentile(gaps[best], 0.5);
    if (consistency >= 0.75 && gap_p50 >= 0.05 * step_p50) {
      Verdict v;
      v.id = "straggler";
      v.rank = traces[best].rank;
      v.impact = gap_p50 / step_p50;
      v.confidence = r4(consistency * std::min(1.0, gap_p50 / (0.1 * step_p50)));
      json ranks = json::array();
      for (size_t r = 0; r < traces.size(); ++r) {
        const auto& s = rep.per_rank[r];
        ranks.push_back({{"rank", s.rank},
                         {"p50_s", r6(s.p50)},
                         {"p99_s", r6(s.p99)},
                         {"collective_p50_s", r6(s.collective_p50)}});
      }
      v.evidence = {{"signal", have_coll ? "shortest collective wait" : "longest compute"},
                    {"consistency", r4(consistency)},
                    {"steps_compared", common.size()},
                    {"wait_gap_p50_s", r6(gap_p50)},
                    {"wait_gap_fraction", r4(gap_p50 / step_p50)},
                    {"per_rank", ranks},
                    {"scale", scale}};
      v.summary = "rank " + std::to_string(traces[best].rank) +
                  fmt(" is the one the others wait for in %.0f%% of steps; they wait %.3g s "
                      "(%.0f%% of a step) in collectives",
                      100 * consistency, gap_p50, 100 * gap_p50 / step_p50);
      rep.verdicts.push_back(v);
    }
    // --- collective transfer: the part no rank can avoid ----------------------------------------
    if (have_coll && step_sum > 0 && transfer / step_sum >= o.collective_bound) {
      Verdict v;
      v.id = "collective_bound";
      v.impact = transfer / step_sum;
      v.confidence = r4(std::min(1.0, 0.5 + v.impact));
      v.evidence = {{"transfer_fraction", r4(transfer / step_sum)},
                    {"collective_fraction", rep.breakdown[index(Phase::kCollective)]},
                    {"method", "per-step minimum of collective time over ranks"}};
      v.summary =
          fmt("%.1f%% of step time is collective transfer (the minimum over ranks, "
              "waiting excluded)",
              100 * v.impact);
      rep.verdicts.push_back(v);
    }
    return;
  }
  double c = rep.breakdown[index(Phase::kCollective)];
  if (traces.size() == 1 && c >= o.collective_bound) {
    Verdict v;
    v.id = "collective_bound";
    v.impact = c;
    v.confidence = r4(std::min(0.6, 0.3 + c));  // one rank cannot separate waiting from transfer
    v.evidence = {{"collective_fraction", c},
                  {"method", "single rank: collective time includes waiting for other ranks"}};
    v.summary =
        fmt("%.1f%% of step time is in collectives (one rank: waiting not separable)", 100 * c);
    rep.verdicts.push_back(v);
  }
}

void check_correlations(const std::vector<RankTrace>& traces, const AnalyzeOptions& o,
                        Report& rep) {
  // --- step time against tokens: sequence-length imbalance -------------------------------------
  double best_r = 0, best_cv = 0, best_slope = 0;
  int best_rank = -1;
  bool any_tokens = false;
  for (const auto& t : traces) {
    std::vector<double> tok, comp;
    for (const auto& s : t.steps) {
      tok.push_back(double(s.tokens));
      comp.push_back(compute_of(s));
      any_tokens |= s.tokens > 0;
    }
    if (tok.size() < 10) continue;
    double m = mean_of(tok);
    if (m <= 0) continue;
    double var = 0;
    for (double x : tok) var += (x - m) * (x - m);
    double cv = std::sqrt(var / double(tok.size())) / m;
    double r = pearson(tok, comp);
    if (cv >= 0.10 && r > best_r) {
      best_r = r;
      best_cv = cv;
      best_rank = t.rank;
      double mc = mean_of(comp), cov = 0;
      for (size_t i = 0; i < tok.size(); ++i) cov += (tok[i] - m) * (comp[i] - mc);
      best_slope = var > 0 ? cov / var : 0;
    }
  }
  if (best_r >= 0.6) {
    Verdict v;
    v.id = "sequence_imbalance";
    v.rank = best_rank;
    v.confidence = r4(best_r);
    v.impact = best_r * best_r * best_cv;
    v.evidence = {{"pearson_r", r4(best_r)},
                  {"tokens_cv", r4(best_cv)},
                  {"seconds_per_1k_tokens", r6(best_slope * 1000)},
                  {"rank", best_rank}};
    v.summary = fmt("compute time follows tokens per step (r = %.2f, tokens vary %.0f%%)", best_r,
                    100 * best_cv);
    rep.verdicts.push_back(v);
  } else if (!any_tokens) {
    rep.notes.push_back("no token counts recorded: sequence-length imbalance not checked");
  }

  // --- pageable host-to-device copies -----------------------------------------------------------
  int64_t pageable = 0, pinned = 0;
  for (const auto& t : traces) {
    for (const auto& s : t.steps) {
      pageable += s.pageable_h2d;
      pinned += s.pinned_h2d;
    }
  }
  if (pageable > 0) {
    double h2d = rep.breakdown[index(Phase::kH2D)];
    double share = double(pageable) / double(pageable + pinned);
    Verdict v;
    v.id = "pageable_h2d";
    v.impact = h2d * share;
    v.confidence = r4(h2d >= 0.02 ? 0.9 : 0.6);
    v.evidence = {{"pageable_copies", pageable},
                  {"pinned_copies", pinned},
                  {"pageable_share", r4(share)},
                  {"h2d_fraction", h2d}};
    v.summary =
        fmt("%.0f of %.0f host-to-device copies come from pageable memory (h2d is %.1f%% "
            "of step time)",
            double(pageable), double(pageable + pinned), 100 * h2d);
    rep.verdicts.push_back(v);
  }
  (void)o;
}

}  // namespace ckpt::profile
