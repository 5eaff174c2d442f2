#include "profile/analyze/report_render.h"

#include <cmath>
#include <cstdio>
#include <sstream>

#include "profile/analyze/analyzer_internal.h"
#include "profile/analyze/verdict_catalog.h"

namespace ckpt::profile {

namespace {

using detail::r6;

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

// The cause the fixes follow: a periodic stall's carrying phase ("compute" when forward, backward
// and optimizer together carry it), else its cause.
std::string fix_cause(const Verdict& v) {
  if (v.evidence.contains("carried_by") && v.evidence["carried_by"].is_string()) {
    return v.evidence["carried_by"].get<std::string>();
  }
  return v.evidence.value("cause", std::string());
}

std::string scale_text(const ScaleModel& sc) {
  char buf[600];
  std::snprintf(buf, sizeof buf,
                "5. Scale: a step is slow (> %s above the median) when any rank's own time is. "
                "Shared slowness p_common = %s, per-rank independent tail p = %s: predicted %s "
                "slow steps at N=%d, observed %s (%s, tolerance %s); %s at %d ranks, %s at %d "
                "ranks\n",
                ms(sc.threshold_s).c_str(), pct(sc.p_common).c_str(), pct(sc.p_independent).c_str(),
                pct(sc.predicted_now).c_str(), sc.ranks, pct(sc.observed_any_slow).c_str(),
                sc.agrees ? "agrees" : "DISAGREES", pct(sc.tolerance).c_str(),
                pct(sc.predicted_2x).c_str(), 2 * sc.ranks, pct(sc.predicted_4x).c_str(),
                4 * sc.ranks);
  std::string out = buf;
  if (!sc.agrees) {
    out +=
        "   the model does not explain the slow steps: their cause is not any rank's own "
        "time (look at the collective transfer and the checks below)\n";
  }
  return out;
}

std::string utilisation_text(const Utilisation& u) {
  char buf[600];
  std::snprintf(buf, sizeof buf,
                "6. Utilisation (%s) per step: mean %s, p10 %s, p50 %s, p90 %s; %zu of %zu "
                "steps below half the median\n",
                u.source == "gpu_busy" ? "GPU busy / step time" : "host not waiting for data",
                pct(u.mean).c_str(), pct(u.p10).c_str(), pct(u.p50).c_str(), pct(u.p90).c_str(),
                u.low_steps, u.steps);
  std::string out = buf;
  if (u.source == "gpu_busy") {
    std::snprintf(buf, sizeof buf,
                  "   GPU idle %s of step time (%s while the host waits for data); NCCL %s, "
                  "exposed (no compute beside it) %s; pageable HtoD %s; host in "
                  "cuda*Synchronize %s\n",
                  pct(u.gpu_idle).c_str(), pct(u.gpu_idle_in_data_wait).c_str(),
                  pct(u.gpu_comm).c_str(), pct(u.gpu_exposed_comm).c_str(),
                  pct(u.gpu_pageable_h2d).c_str(), pct(u.host_sync).c_str());
    out += buf;
  }
  return out;
}

}  // namespace

std::string json_text(const nlohmann::json& j) {
  return j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

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
    nlohmann::json x = {{"id", v.id()},
                        {"confidence", v.confidence},
                        {"evidence", v.evidence},
                        {"impact", detail::r6(v.impact)},
                        {"impact_s", r6(v.impact_s)},
                        {"of_s", r6(v.of_s)}};
    if (v.kind == VerdictId::kStraggler && v.rank) x["rank"] = *v.rank;
    if (v.period_steps) x["period_steps"] = *v.period_steps;
    if (v.explained_by) {
      x["explained_by"] = verdict_name(*v.explained_by);
      x["explained_share"] = v.explained_share;
    }
    if (v.refines) x["refines"] = verdict_name(*v.refines);
    nlohmann::json fixes = nlohmann::json::array();
    for (const auto& f : verdict_fixes(v.kind, fix_cause(v))) {
      fixes.push_back({{"what", f.what}, {"cost", f.cost}});
    }
    x["fixes"] = fixes;
    vs.push_back(x);
  }
  j["verdicts"] = vs;
  nlohmann::json ranks = nlohmann::json::array();
  for (const auto& s : r.per_rank) {
    ranks.push_back(
        {{"rank", s.rank},
         {"steps", s.steps},
         {"step_time",
          {{"mean", r6(s.mean)}, {"p50", r6(s.p50)}, {"p90", r6(s.p90)}, {"p99", r6(s.p99)}}},
         {"slow_fraction", r6(s.slow_fraction)},
         {"data_wait_fraction", r6(s.data_wait_fraction)},
         {"collective_p50", r6(s.collective_p50)},
         {"own_time", {{"p50", r6(s.own_p50)}, {"p99", r6(s.own_p99)}}},
         {"wait", {{"p50", r6(s.wait_p50)}, {"mean", r6(s.wait_mean)}}},
         {"own_slow_fraction", r6(s.own_slow_fraction)},
         {"last_fraction", r6(s.last_fraction)}});
  }
  for (size_t i = 0; i < r.per_rank.size(); ++i) {
    if (r.per_rank[i].gpu_busy_fraction < 0) continue;
    ranks[i]["gpu_busy_fraction"] = r6(r.per_rank[i].gpu_busy_fraction);
    ranks[i]["gpu_nccl_fraction"] = r6(r.per_rank[i].gpu_comm_fraction);
  }
  j["per_rank"] = ranks;
  const ScaleModel& sc = r.scale;
  j["scale_model"] = {{"ranks", sc.ranks},
                      {"model", "p_common + (1 - p_common) * (1 - prod(1 - p_r))"},
                      {"p_slow_per_rank", r6(sc.p_slow)},
                      {"p_common", r6(sc.p_common)},
                      {"p_independent", r6(sc.p_independent)},
                      {"slow_threshold_s", r6(sc.threshold_s)},
                      {"steps_compared", sc.steps_compared},
                      {"predicted_slow", r6(sc.predicted_now)},
                      {"observed_slow", r6(sc.observed_any_slow)},
                      {"tolerance", r6(sc.tolerance)},
                      {"agrees", sc.agrees},
                      {"predicted_slow_at_2x_ranks", r6(sc.predicted_2x)},
                      {"predicted_slow_at_4x_ranks", r6(sc.predicted_4x)}};
  const Utilisation& u = r.utilisation;
  nlohmann::json uj = {{"source", u.source}, {"steps", u.steps}, {"mean", u.mean},
                       {"p10", u.p10},       {"p50", u.p50},     {"p90", u.p90},
                       {"min", u.min},       {"max", u.max},     {"low_steps", u.low_steps}};
  if (u.source == "gpu_busy") {
    uj["gpu"] = {{"idle_fraction", u.gpu_idle},
                 {"idle_in_data_wait_fraction", u.gpu_idle_in_data_wait},
                 {"nccl_fraction", u.gpu_comm},
                 {"exposed_comm_fraction", u.gpu_exposed_comm},
                 {"pageable_h2d_fraction", u.gpu_pageable_h2d},
                 {"host_sync_fraction", u.host_sync}};
  }
  j["utilisation"] = uj;
  j["notes"] = r.notes;
  return j;
}

std::string report_text(const Report& r) {
  std::ostringstream o;
  o << "Step profile: " << r.ranks << " rank(s), " << r.steps << " steps; step time mean "
    << ms(r.mean) << ", p50 " << ms(r.p50) << ", p99 " << ms(r.p99) << "\n\n";

  o << "1. Liveness: ";
  bool hung = !r.verdicts.empty() && r.verdicts.front().kind == VerdictId::kHung;
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
    if (v.kind == VerdictId::kPeriodicStall) periodic = &v;
  }
  o << (periodic ? "periodic - " + periodic->summary : std::string("no periodic stall")) << "\n";

  o << "3. Breakdown (fraction of step time):\n";
  for (int p = 0; p < kNumPhases; ++p) {
    char buf[80];
    std::snprintf(buf, sizeof buf, "   %-11s %6s\n", phase_name(static_cast<Phase>(p)),
                  pct(r.breakdown[p]).c_str());
    o << buf;
  }

  o << "4. Per rank (own time = step start to entering the collective; wait = time in the "
       "collective waiting for the others):\n"
       "   rank   steps   own p50    own p99   wait p50   own slow   last   step p50\n";
  for (const auto& s : r.per_rank) {
    char buf[200];
    std::snprintf(buf, sizeof buf, "   %4d %7zu %10s %10s %10s %8s %6s %10s\n", s.rank, s.steps,
                  ms(s.own_p50).c_str(), ms(s.own_p99).c_str(), ms(s.wait_p50).c_str(),
                  pct(s.own_slow_fraction).c_str(), pct(s.last_fraction).c_str(),
                  ms(s.p50).c_str());
    o << buf;
  }
  o << scale_text(r.scale);
  if (!r.utilisation.source.empty()) o << utilisation_text(r.utilisation);
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
    char share[160];
    std::snprintf(share, sizeof share, "   impact: %.1f%% (%.4g s of %.4g s measured)\n",
                  100 * v.impact, v.impact_s, v.of_s);
    o << " * " << v.id() << head << ": " << v.summary << "\n";
    o << share;
    if (v.explained_by) {
      o << "   explained by: " << verdict_name(*v.explained_by) << " (" << pct(v.explained_share)
        << " of it)\n";
    }
    o << "   evidence: " << v.evidence.dump() << "\n";
    if (const VerdictText* t = verdict_text(v.kind)) {
      o << "   next measurement: " << t->next_measurement << "\n";
      for (const auto& f : verdict_fixes(v.kind, fix_cause(v))) {
        o << "   fix: " << f.what << " [" << f.cost << "]\n";
      }
      for (const auto& d : t->decline) o << "   decline: " << d << "\n";
    }
  }
  for (const auto& n : r.notes) o << " note: " << n << "\n";
  return o.str();
}

}  // namespace ckpt::profile
