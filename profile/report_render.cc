#include "profile/report_render.h"

#include <cmath>
#include <cstdio>
#include <sstream>

#include "profile/verdict_catalog.h"

namespace ckpt::profile {

namespace {

double r6(double v) { return std::round(v * 1e6) / 1e6; }

std::string ms(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f ms", s * 1e3);
  return buf;
}

std::string pct(double f) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f%%", f * 100);
  return buf;
}

}  // namespace

nlohmann::json report_json(const Report& r) {
  nlohmann::json j;
  j["ranks"] = r.ranks;
  j["steps"] = r.steps;
  j["step_time"] = {{"mean", r6(r.mean)}, {"p50", r6(r.p50)}, {"p99", r6(r.p99)}};
  nlohmann::json b = nlohmann::json::object();
  for (int p = 0; p < kNumPhases; ++p) b[phase_name(static_cast<Phase>(p))] = r.breakdown[p];
  j["breakdown"] = b;
  nlohmann::json vs = nlohmann::json::array();
  for (const auto& v : r.verdicts) {
    nlohmann::json x = {{"id", v.id}, {"confidence", v.confidence}, {"evidence", v.evidence}};
    if (v.id == "straggler" && v.rank) x["rank"] = *v.rank;
    if (v.period_steps) x["period_steps"] = *v.period_steps;
    vs.push_back(x);
  }
  j["verdicts"] = vs;
  return j;
}

std::string report_text(const Report& r) {
  std::ostringstream o;
  o << "Step profile: " << r.ranks << " rank(s), " << r.steps << " steps; step time mean "
    << ms(r.mean) << ", p50 " << ms(r.p50) << ", p99 " << ms(r.p99) << "\n\n";

  o << "1. Liveness: ";
  bool hung = !r.verdicts.empty() && r.verdicts.front().id == "hung";
  if (hung) {
    o << "HUNG - " << r.verdicts.front().summary << "\n";
  } else {
    char buf[200];
    std::snprintf(buf, sizeof buf,
                  "steps advancing; rate second half / first half %.2f; longest step or pause "
                  "%s%s\n",
                  r.liveness.rate_ratio, ms(r.liveness.max_gap_s).c_str(),
                  r.liveness.steady ? "" : " (NOT steady)");
    o << buf;
  }

  o << "2. Shape: ";
  const Verdict* periodic = nullptr;
  for (const auto& v : r.verdicts) {
    if (v.id == "periodic_stall") periodic = &v;
  }
  o << (periodic ? "periodic - " + periodic->summary : std::string("no periodic stall")) << "\n";

  o << "3. Breakdown (fraction of step time):\n";
  for (int p = 0; p < kNumPhases; ++p) {
    char buf[80];
    std::snprintf(buf, sizeof buf, "   %-11s %6s\n", phase_name(static_cast<Phase>(p)),
                  pct(r.breakdown[p]).c_str());
    o << buf;
  }

  o << "4. Distribution per rank:\n   rank   steps        p50        p90        p99  p99/mean  "
       "slow\n";
  for (const auto& s : r.per_rank) {
    char buf[160];
    std::snprintf(buf, sizeof buf, "   %4d %7zu %10s %10s %10s %8.2f %6s\n", s.rank, s.steps,
                  ms(s.p50).c_str(), ms(s.p90).c_str(), ms(s.p99).c_str(), s.p99_over_mean,
                  pct(s.slow_fraction).c_str());
    o << buf;
  }
  {
    char buf[320];
    std::snprintf(buf, sizeof buf,
                  "5. Scale: per-rank P(slow step) p = %s; a step is slow when any rank is: "
                  "1-(1-p)^N = %s at N=%d (observed %s), %s at %d ranks, %s at %d ranks\n",
                  pct(r.scale.p_slow).c_str(), pct(r.scale.predicted_now).c_str(), r.scale.ranks,
                  pct(r.scale.observed_any_slow).c_str(), pct(r.scale.predicted_2x).c_str(),
                  2 * r.scale.ranks, pct(r.scale.predicted_4x).c_str(), 4 * r.scale.ranks);
    o << buf;
  }
  if (r.measured_budget) {
    const Budget& b = *r.measured_budget;
    char buf[320];
    std::snprintf(buf, sizeof buf,
                  "   Budget MODEL from measured data (not a measurement): %.4g samples/s per GPU "
                  "when fed, loader delivered %.4g samples/s; predicted utilisation %s\n",
                  b.per_gpu_rate, b.loader_cap, pct(b.predicted_utilisation).c_str());
    o << buf;
  }

  o << "\nVerdicts (primary first):\n";
  if (r.verdicts.empty()) o << "   none\n";
  for (const auto& v : r.verdicts) {
    char head[64];
    std::snprintf(head, sizeof head, " (confidence %.2f)", v.confidence);
    o << " * " << v.id << head << ": " << v.summary << "\n";
    o << "   evidence: " << v.evidence.dump() << "\n";
    if (const VerdictText* t = verdict_text(v.id)) {
      o << "   next measurement: " << t->next_measurement << "\n";
      for (const auto& f : t->fixes) o << "   fix: " << f.what << " [" << f.cost << "]\n";
      for (const auto& d : t->decline) o << "   decline: " << d << "\n";
    }
  }
  for (const auto& n : r.notes) o << " note: " << n << "\n";
  return o.str();
}

}  // namespace ckpt::profile
