// The last step of the analysis: which findings are worth a reader's time, which explain which, and
// in what order they are read.
//
//   1. Minimum share. A verdict whose impact (measured seconds explained / measured seconds) is
//      below its verdict_min_share() is not a verdict: it becomes a note with its numbers
//      ("pageable_h2d: 0.05% of step time, below its 1% minimum share: ..."). hung has none.
//   2. Causes before symptoms. Where both verdicts of a pair hold and the evidence links them, the
//      symptom names its cause (explained_by), the share of it the cause accounts for, and says
//      so in its summary:
//        input_bound      → gpu_idle        most of the GPU's idle time is the host waiting for
//        data input_bound      → periodic_stall  the stall is carried by data_wait (a loader
//        refill) straggler        → collective_bound  most collective time is waiting, not transfer
//        straggler        → periodic_stall  the stall is carried by the collective (waiting)
//        sequence_imbalance → periodic_stall  the stall is carried by compute and tokens drive it
//      A periodic stall carried by checkpoint or eval names that phase as its cause in `cause`.
//   3. Order: hung first; the rest by impact, highest first, except that each explained verdict
//      comes right after its cause and each refinement (cpu_bound_loader, io_bound_loader of
//      input_bound) right after what it refines.
#include <algorithm>
#include <functional>

#include "profile/analyze/analyzer.h"
#include "profile/analyze/analyzer_internal.h"

namespace ckpt::profile::detail {

namespace {

struct CausalRule {
  VerdictId cause, effect;
  // The share of the effect the cause accounts for, from the effect's and the cause's evidence;
  // the rule applies when it is at least 0.5.
  std::function<double(const Verdict& cause, const Verdict& effect)> share;
  const char* because;  // the summary's prefix for the effect
};

double num(const nlohmann::json& e, const char* key) {
  return e.contains(key) && e[key].is_number() ? e[key].get<double>() : 0;
}

bool periodic_cause_in(const Verdict& v, std::initializer_list<const char*> phases) {
  if (!v.evidence.contains("cause") || !v.evidence["cause"].is_string()) return false;
  std::string c = v.evidence["cause"].get<std::string>();
  for (const char* p : phases) {
    if (c == p) return true;
  }
  return false;
}

const std::vector<CausalRule>& rules() {
  static const std::vector<CausalRule> kRules = {
      {VerdictId::kInputBound, VerdictId::kGpuIdle,
       [](const Verdict&, const Verdict& e) {
         return num(e.evidence, "idle_share_waiting_for_data");
       },
       "GPU idle: mostly the input wait above"},
      {VerdictId::kInputBound, VerdictId::kPeriodicStall,
       [](const Verdict&, const Verdict& e) {
         return periodic_cause_in(e, {"data_wait"}) ? num(e.evidence, "cause_share") : 0;
       },
       "the periodic stall is the input wait above, in bursts"},
      {VerdictId::kStraggler, VerdictId::kCollectiveBound,
       [](const Verdict&, const Verdict& e) {
         double coll = num(e.evidence, "collective_fraction");
         double transfer = num(e.evidence, "transfer_fraction");
         return coll > 0 && e.evidence.contains("transfer_fraction") ? (coll - transfer) / coll : 0;
       },
       "collective time: mostly waiting for the straggler above"},
      {VerdictId::kStraggler, VerdictId::kPeriodicStall,
       [](const Verdict&, const Verdict& e) {
         return periodic_cause_in(e, {"collective"}) ? num(e.evidence, "cause_share") : 0;
       },
       "the periodic stall is the wait for the straggler above"},
      {VerdictId::kSequenceImbalance, VerdictId::kPeriodicStall,
       [](const Verdict&, const Verdict& e) {
         return e.evidence.value("carried_by", std::string()) == "compute"
                    ? num(e.evidence, "cause_share")
                    : 0;
       },
       "the periodic stall follows the tokens per step (sequence_imbalance above)"},
  };
  return kRules;
}

Verdict* find(std::vector<Verdict>& vs, VerdictId id) {
  for (auto& v : vs) {
    if (v.kind == id) return &v;
  }
  return nullptr;
}

void below_minimum_to_notes(Report& rep) {
  std::vector<Verdict> kept;
  for (auto& v : rep.verdicts) {
    double min = verdict_min_share(v.kind);
    if (r4(v.impact) >= min) {  // the thresholds that emit verdicts compare 4-decimal shares
      kept.push_back(std::move(v));
      continue;
    }
    rep.notes.push_back(v.id() + ": " + fmt("%.3g%% of step time, below its ", 100 * v.impact) +
                        fmt("%.3g%% minimum share for a verdict: ", 100 * min) + v.summary);
  }
  rep.verdicts = std::move(kept);
  // A refinement whose verdict became a note goes with it.
  std::vector<Verdict> out;
  for (auto& v : rep.verdicts) {
    if (v.refines && find(rep.verdicts, *v.refines) == nullptr) continue;
    out.push_back(std::move(v));
  }
  rep.verdicts = std::move(out);
}

void explain(Report& rep) {
  for (const auto& rule : rules()) {
    Verdict* cause = find(rep.verdicts, rule.cause);
    Verdict* effect = find(rep.verdicts, rule.effect);
    if (cause == nullptr || effect == nullptr || effect->explained_by) continue;
    double share = rule.share(*cause, *effect);
    if (share < 0.5) continue;
    effect->explained_by = rule.cause;
    effect->explained_share = r4(std::min(1.0, share));
    effect->summary = std::string(rule.because) + " (" +
                      fmt("%.0f%% of it): ", 100 * std::min(1.0, share)) + effect->summary;
  }
}

// hung, then roots by impact; each verdict's dependants (explained or refining) right after it.
void order(Report& rep) {
  std::vector<Verdict> all = std::move(rep.verdicts);
  auto parent = [](const Verdict& v) -> std::optional<VerdictId> {
    return v.explained_by ? v.explained_by : v.refines;
  };
  auto by_rank = [](const Verdict& a, const Verdict& b) {
    bool ha = a.kind == VerdictId::kHung, hb = b.kind == VerdictId::kHung;
    if (ha != hb) return ha;
    if (a.refines.has_value() != b.refines.has_value()) return b.refines.has_value();
    return a.impact > b.impact;
  };
  std::stable_sort(all.begin(), all.end(), by_rank);
  std::vector<bool> placed(all.size(), false);
  std::vector<Verdict> out;
  std::function<void(size_t)> place = [&](size_t i) {
    placed[i] = true;
    out.push_back(all[i]);
    for (size_t j = 0; j < all.size(); ++j) {
      if (!placed[j] && parent(all[j]) == all[i].kind) place(j);
    }
  };
  for (size_t i = 0; i < all.size(); ++i) {
    if (!placed[i] && !parent(all[i])) place(i);
  }
  for (size_t i = 0; i < all.size(); ++i) {
    if (!placed[i]) place(i);  // a parent that is absent: keep it where it ranks
  }
  rep.verdicts = std::move(out);
}

}  // namespace

void order_verdicts(Report& rep) {
  below_minimum_to_notes(rep);
  explain(rep);
  order(rep);
}

}  // namespace ckpt::profile::detail
