// Stragglers: the rank the others wait for. Every rank's own time (step start → entering the
// collective) is compared step by step; the barrier-equalised step time never is.
//
//   consistent  the same rank arrives last in most steps, far more often than chance (1/N; a
//               binomial test), and by a margin that matters (its own time exceeds the median of
//               the others' by ≥ 3 % of the step). Robust to noise: no single step has to clear
//               a threshold, so "last in 15 of 20 steps, 16 ms behind" is found.
//   tail        a rank that is slow only on a few steps but causes them: on the slow synchronised
//               steps that are not slow on many ranks at once, the same rank has the longest own
//               time (and the shortest wait), long enough alone to make the step slow and not
//               spent in a checkpoint or evaluation, in ≥ 60 % of them (or in steps that hold
//               ≥ 60 % of the time they lost) and at least twice.
#include <algorithm>
#include <cmath>

#include "profile/analyze/analyzer.h"
#include "profile/analyze/analyzer_internal.h"
#include "profile/analyze/series_stats.h"

namespace ckpt::profile::detail {

namespace {

using nlohmann::json;

// P(X ≥ c) for X ~ Binomial(n, p), summed in log space (n is at most a few million).
double binomial_tail(size_t n, size_t c, double p) {
  if (c == 0) return 1.0;
  double total = 0;
  for (size_t x = c; x <= n; ++x) {
    double lg = std::lgamma(double(n) + 1) - std::lgamma(double(x) + 1) -
                std::lgamma(double(n - x) + 1) + double(x) * std::log(p) +
                double(n - x) * std::log1p(-p);
    total += std::exp(lg);
    if (lg < -745) break;  // the terms only shrink from here
  }
  return std::min(1.0, total);
}

size_t argmax_row(const StepMatrix& m, size_t k) {
  size_t best = 0;
  for (size_t r = 1; r < m.ranks; ++r) {
    if (m.at(m.own, k, r) > m.at(m.own, k, best)) best = r;
  }
  return best;
}

double median_others(const StepMatrix& m, const std::vector<double>& v, size_t k, size_t skip) {
  std::vector<double> o;
  for (size_t r = 0; r < m.ranks; ++r) {
    if (r != skip) o.push_back(m.at(v, k, r));
  }
  return percentile(o, 0.5);
}

json per_rank_json(const Report& rep) {
  json ranks = json::array();
  for (const auto& s : rep.per_rank) {
    ranks.push_back({{"rank", s.rank},
                     {"p50_s", r6(s.p50)},
                     {"p99_s", r6(s.p99)},
                     {"collective_p50_s", r6(s.collective_p50)},
                     {"own_p50_s", r6(s.own_p50)},
                     {"wait_p50_s", r6(s.wait_p50)},
                     {"last_fraction", r4(s.last_fraction)}});
  }
  return ranks;
}

// When the straggler's lead is its own wait for data (its loader, its shard of the dataset, its
// node's storage), the verdict says so: the next measurement is that rank's input pipeline, not
// its device.
void own_data_wait(const std::vector<RankTrace>& traces, size_t slow, double lead_p50, Verdict* v) {
  auto p50 = [&](size_t r) {
    std::vector<double> w;
    for (const auto& s : traces[r].steps) w.push_back(s.phase_s[index(Phase::kDataWait)]);
    return percentile(w, 0.5);
  };
  std::vector<double> others;
  for (size_t r = 0; r < traces.size(); ++r) {
    if (r != slow) others.push_back(p50(r));
  }
  const double mine = p50(slow), theirs = percentile(others, 0.5);
  v->evidence["own_data_wait_p50_s"] = r6(mine);
  v->evidence["others_data_wait_p50_s"] = r6(theirs);
  if (lead_p50 <= 0 || mine - theirs < 0.5 * lead_p50) return;
  v->evidence["cause"] = "its own input pipeline";
  v->summary +=
      fmt("; it waits %.3g s per step for data (the others %.3g s): the lead is its "
          "input pipeline (its DataLoader workers, its dataset shard, its node's "
          "storage), look there before its device",
          mine, theirs);
}

bool consistent_straggler(const std::vector<RankTrace>& traces, const StepMatrix& m, Report& rep) {
  std::vector<size_t> last(m.ranks, 0);
  for (size_t k = 0; k < m.rows; ++k) ++last[argmax_row(m, k)];
  size_t best = size_t(std::max_element(last.begin(), last.end()) - last.begin());
  std::vector<double> lead, wait_gap;
  for (size_t k = 0; k < m.rows; ++k) {
    lead.push_back(m.at(m.own, k, best) - median_others(m, m.own, k, best));
    wait_gap.push_back(median_others(m, m.wait, k, best) - m.at(m.wait, k, best));
  }
  double lead_p50 = percentile(lead, 0.5);
  double consistency = double(last[best]) / double(m.rows);
  double p_value = binomial_tail(m.rows, last[best], 1.0 / double(m.ranks));
  double step = m.sync_p50;
  if (consistency < 0.5 || p_value > 1e-3 || lead_p50 < 0.03 * step || step <= 0) return false;
  Verdict v;
  v.set(VerdictId::kStraggler);
  v.rank = traces[best].rank;
  double lead_s = 0, sync_s = 0;
  for (size_t k = 0; k < m.rows; ++k) {
    lead_s += std::max(0.0, lead[k]);  // the time the others waited for it
    sync_s += m.sync_s[k];
  }
  v.set_impact(lead_s, sync_s);
  v.confidence = r4(consistency * std::min(1.0, lead_p50 / (0.1 * step)));
  double gap_p50 = percentile(wait_gap, 0.5);
  v.evidence = {
      {"kind", "consistent"},
      {"signal", m.have_coll ? "latest arrival at the collective (own time)" : "longest own time"},
      {"consistency", r4(consistency)},
      {"last_steps", last[best]},
      {"steps_compared", m.rows},
      {"binomial_p_value", p_value},
      {"own_lead_p50_s", r6(lead_p50)},
      {"wait_gap_p50_s", r6(gap_p50)},
      {"wait_gap_fraction", r4(gap_p50 / step)},
      {"per_rank", per_rank_json(rep)}};
  v.summary = "rank " + std::to_string(traces[best].rank) +
              fmt(" arrives last at the collective in %.0f%% of steps (chance: %.0f%%), %.3g s "
                  "behind the others' median",
                  100 * consistency, 100.0 / double(m.ranks), lead_p50);
  own_data_wait(traces, best, lead_p50, &v);
  rep.verdicts.push_back(v);
  return true;
}

void tail_straggler(const std::vector<RankTrace>& traces, const StepMatrix& m, Report& rep) {
  size_t need = std::max<size_t>(2, (m.ranks + 1) / 2);
  std::vector<size_t> slow_rows;
  std::vector<size_t> culprit_count(m.ranks, 0);
  std::vector<double> culprit_excess(m.ranks, 0);
  double slow_excess = 0;  // the slow steps' time above the median step
  for (size_t k = 0; k < m.rows; ++k) {
    if (!m.step_slow(k)) continue;
    size_t n = 0;
    for (size_t r = 0; r < m.ranks; ++r) n += m.own_slow(k, r);
    if (n >= need) continue;  // a shared cause, not one rank's tail
    slow_rows.push_back(k);
    slow_excess += m.sync_s[k] - m.sync_p50;
    // The culprit's own time alone must make the step slow, and not because it saved a
    // checkpoint or ran evaluation there (that is a periodic stall, not a straggler).
    size_t c = argmax_row(m, k);
    if (m.own_slow(k, c) && m.at(m.stall, k, c) < 0.5 * (m.at(m.own, k, c) - m.sync_own_p50)) {
      ++culprit_count[c];
      culprit_excess[c] += m.sync_s[k] - m.sync_p50;
    }
  }
  if (slow_rows.empty()) return;
  size_t best =
      size_t(std::max_element(culprit_count.begin(), culprit_count.end()) - culprit_count.begin());
  // Under heavy noise other ranks have slow steps too, but short ones: the culprit is the rank
  // behind most of the slow steps or behind most of the time they lost.
  double share = double(culprit_count[best]) / double(slow_rows.size());
  double time_share = slow_excess > 0 ? culprit_excess[best] / slow_excess : 0;
  if (culprit_count[best] < 2 || (share < 0.6 && time_share < 0.6)) return;
  std::vector<double> excess, own_wait, others_wait;
  json steps = json::array();
  double lost = 0, total = 0;
  for (double s : m.sync_s) total += s;
  for (size_t k : slow_rows) {
    if (argmax_row(m, k) != best || !m.own_slow(k, best)) continue;
    if (m.at(m.stall, k, best) >= 0.5 * (m.at(m.own, k, best) - m.sync_own_p50)) continue;
    excess.push_back(m.at(m.own, k, best) - m.sync_own_p50);
    own_wait.push_back(m.at(m.wait, k, best));
    others_wait.push_back(median_others(m, m.wait, k, best));
    lost += m.sync_s[k] - m.sync_p50;
    if (steps.size() < 20) steps.push_back(m.step[k]);
  }
  double fraction = double(culprit_count[best]) / double(m.rows);
  Verdict v;
  v.set(VerdictId::kStraggler);
  v.rank = traces[best].rank;
  v.set_impact(lost, total);
  v.confidence =
      r4(std::min(1.0, std::max(share, time_share) * std::min(1.0, culprit_count[best] / 3.0)));
  v.evidence = {{"kind", "tail"},
                {"signal", "longest own time and shortest wait on the slow steps"},
                {"consistency", r4(share)},
                {"share_of_slow_time", r4(time_share)},
                {"slow_steps", slow_rows.size()},
                {"culprit_steps", culprit_count[best]},
                {"culprit_step_numbers", steps},
                {"fraction_of_steps", r4(fraction)},
                {"steps_compared", m.rows},
                {"own_excess_p50_s", r6(percentile(excess, 0.5))},
                {"culprit_wait_p50_s", r6(percentile(own_wait, 0.5))},
                {"others_wait_p50_s", r6(percentile(others_wait, 0.5))},
                {"per_rank", per_rank_json(rep)}};
  v.summary = "rank " + std::to_string(traces[best].rank) +
              fmt(" is slow on %.1f%% of steps and causes %.0f%% of the slow steps (+%.3g s "
                  "own time; ",
                  100 * fraction, 100 * share, percentile(excess, 0.5)) +
              fmt("it waits %.3g s there, the others %.3g s)", percentile(own_wait, 0.5),
                  percentile(others_wait, 0.5));
  rep.verdicts.push_back(v);
}

}  // namespace

void check_stragglers(const std::vector<RankTrace>& traces, const StepMatrix& m, Report& rep) {
  if (m.ranks < 2 || m.rows < 5) return;
  if (consistent_straggler(traces, m, rep)) return;
  tail_straggler(traces, m, rep);
}

}  // namespace ckpt::profile::detail
