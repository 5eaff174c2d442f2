#include "verify/audit/rules.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <sstream>

namespace ckpt::verify {

namespace {

using C = AuditComponent;
using S = ComponentStatus;

struct Advice {
  const char* consequence;
  const char* fix;
  // When the component is there but inconsistent (damaged, lost in part, contradicting the
  // rest); null: `consequence` holds for that too.
  const char* inconsistent = nullptr;
};

// What a missing/empty/inconsistent component does to the run, and the fix (DOMAIN.md).
const std::map<AuditComponent, Advice>& advice() {
  static const std::map<AuditComponent, Advice> kAdvice = {
      {C::kModel,
       {"nothing to resume: the run restarts from its initial weights",
        "save model.state_dict() in every checkpoint",
        "the weights cannot be restored as saved: loading fails on the damaged or lost tensors, "
        "or, forced, resumes from wrong weights"}},
      {C::kOptimizer,
       {"Adam/momentum state restarts at zero: a loss bump that takes hundreds of steps to recover",
        "save optimizer.state_dict() and call optimizer.load_state_dict() on resume before the "
        "first step",
        "the optimizer state cannot be restored as saved: loading fails, or resumes from moments "
        "and a step that do not match the run (a loss bump)"}},
      {C::kScheduler,
       {"the LR schedule restarts, often back into warmup: hundreds of steps at the wrong LR "
        "(the same loss bump)",
        "save scheduler.state_dict() and call scheduler.load_state_dict() on resume; never set "
        "param_group['lr'] by hand"}},
      {C::kRngCpu,
       {"dropout, augmentation and shuffling stop being reproducible after a restart",
        "save torch.get_rng_state() (plus numpy and random states) and restore them on resume"}},
      {C::kRngCuda,
       {"GPU dropout and random ops diverge from the uninterrupted run after a restart",
        "save torch.cuda.get_rng_state_all() and restore it with set_rng_state_all()"}},
      {C::kLoader,
       {"each restart replays the head of the epoch; the tail of the dataset may never be seen "
        "(no loss bump, so nobody notices)",
        "save the loader position (torchdata StatefulDataLoader.state_dict(), or epoch + samples "
        "consumed with a seeded sampler) and skip to it on resume"}},
      {C::kCounters,
       {"step-based schedules, logging and checkpoint names restart from zero; counters and logs "
        "drift",
        "save global_step and epoch"}},
      {C::kGradScaler,
       {"the fp16 loss scale restarts at its initial value: the first steps after a restart "
        "overflow and are skipped, and the scale re-converges",
        "save scaler.state_dict() (torch.amp.GradScaler) and load it on resume"}},
  };
  return kAdvice;
}

std::string fmt(double x) {
  std::ostringstream o;
  o.precision(6);
  o << x;
  return o.str();
}

// Relative: an LR of 1e-6 against 1.9e-6 differs, a step of 6 against 6.0000001 does not.
bool close(double a, double b) {
  return std::fabs(a - b) <= 1e-6 * std::max(std::fabs(a), std::fabs(b)) + 1e-15;
}

class Judge {
 public:
  Judge(const CheckpointView& v, AuditReport* r) : v_(v), r_(*r) {}

  void run() {
    model();
    optimizer();
    scheduler();
    rng_cpu();
    rng_cuda();
    loader();
    counters();
    grad_scaler();
    stale_counters();
    stale_optimizer();
    for (const ReaderFinding& f : v_.findings) {
      if (f.inconsistent && f.component) {
        ComponentReport& c = get(*f.component);
        if (c.status == S::kPresent || c.status == S::kDerived || c.status == S::kUnknown) {
          c.status = S::kInconsistent;
          c.evidence += "; " + f.message;
        }
      }
    }
  }

 private:
  ComponentReport& get(AuditComponent name) {
    for (auto& c : r_.components) {
      if (c.component == name) return c;
    }
    r_.components.push_back({name, S::kMissing, "", "", "", true});
    return r_.components.back();
  }
  void set(AuditComponent name, ComponentStatus status, const std::string& evidence) {
    ComponentReport& c = get(name);
    c.status = status;
    c.evidence = evidence;
  }

  // The view with the one optimizer's step as global_step, for the hypotheses below; nullopt
  // with several optimizers or schedulers, or a step that is no whole number.
  std::optional<CheckpointView> step_as_counter() const {
    if (optimizers().size() != 1 || schedulers().size() != 1) return std::nullopt;
    const auto step = common_step(v_.optimizer);
    if (!step || *step < 0 || !close(*step, std::round(*step))) return std::nullopt;
    CheckpointView moved = v_;
    moved.counters.global_step = static_cast<int64_t>(std::llround(*step));
    moved.findings.clear();  // the readers' findings are applied once, by run()
    return moved;
  }

  // Judges `view`'s optimizer and scheduler alone (the hypotheses of stale_counters and
  // stale_optimizer): their reports.
  static std::pair<ComponentReport, ComponentReport> judged(const CheckpointView& view) {
    AuditReport r;
    Judge j(view, &r);
    j.optimizer();
    j.scheduler();
    return {j.get(C::kOptimizer), j.get(C::kScheduler)};
  }

  // The optimizer and the scheduler both disagree with global_step, but agree with each other:
  // judged again with the optimizer's step as global_step, both are fine. Then the counter is the
  // odd one out (a trainer_state.json from another save beside them), not the two of them.
  void stale_counters() {
    ComponentReport& o = get(C::kOptimizer);
    ComponentReport& sc = get(C::kScheduler);
    const auto& gs = v_.counters.global_step;
    if (o.status != S::kInconsistent || sc.status != S::kInconsistent || !gs ||
        !v_.scheduler.last_epoch)
      return;
    const auto moved = step_as_counter();
    if (!moved) return;
    auto [opt, sched] = judged(*moved);
    if (opt.status != S::kPresent || sched.status != S::kPresent) return;
    const auto step = moved->counters.global_step;
    const std::string both = "the optimizer (step " + std::to_string(*step) +
                             ") and the scheduler (last_epoch " +
                             std::to_string(*v_.scheduler.last_epoch) + ")";
    const std::string counter = "global_step " + std::to_string(*gs);
    o = opt;
    sc = sched;
    o.evidence += "; " + both + " agree with each other, not with " + counter;
    sc.evidence += "; " + both + " agree with each other, not with " + counter;
    ComponentReport& c = get(C::kCounters);
    c.status = S::kInconsistent;
    c.evidence += "; " + counter + " disagrees with " + both +
                  ", which agree with each other: the file that holds the counter" +
                  (v_.counters.source.empty() ? "" : " (" + v_.counters.source + ")") +
                  " is from another save";
  }

  // The optimizer disagrees with the counters only in its step, and the scheduler with the
  // optimizer only in the LR: given the scheduler's LRs, the scheduler is fine. Then the optimizer
  // is the stale file (an optimizer.pt from another save), and the scheduler is not blamed for
  // the LR that came with it.
  void stale_optimizer() {
    ComponentReport& o = get(C::kOptimizer);
    ComponentReport& sc = get(C::kScheduler);
    const SchedulerPart& sp = v_.scheduler;
    if (o.status != S::kInconsistent || sc.status != S::kInconsistent || sp.last_lr.empty() ||
        sp.last_lr.size() != v_.optimizer.groups.size())
      return;
    auto moved = step_as_counter();  // only the optimizer's step was wrong?
    if (!moved || judged(*moved).first.status != S::kPresent) return;
    moved = v_;  // the scheduler's LRs in the optimizer's groups: only the LR was wrong?
    moved->findings.clear();
    for (size_t i = 0; i < sp.last_lr.size(); ++i) moved->optimizer.groups[i].lr = sp.last_lr[i];
    const ComponentReport sched = judged(*moved).second;
    if (sched.status != S::kPresent) return;
    sc = sched;
    sc.evidence +=
        "; its _last_lr disagrees with the optimizer's param_groups lr, and the "
        "optimizer is the one that disagrees with the counters: the LR came with an "
        "optimizer state from another save";
    o.evidence +=
        "; the scheduler agrees with the counters: the optimizer's file is from "
        "another save";
  }

  void model() {
    const ModelPart& m = v_.model;
    if (!m.found) {  // a reader's evidence says why, else it adds to the default
      const std::string none = "no dict of tensors (no model state_dict)";
      const bool adds = m.evidence.empty() || m.evidence[0] == ';' || m.evidence[0] == ' ';
      return set(C::kModel, S::kMissing, adds ? none + m.evidence : m.evidence);
    }
    set(C::kModel, m.tensors.empty() ? S::kEmpty : S::kPresent, m.evidence);
  }

  // Every optimizer of the checkpoint, the first one first.
  std::vector<const OptimizerPart*> optimizers() const {
    std::vector<const OptimizerPart*> out{&v_.optimizer};
    for (const auto& o : v_.more_optimizers) out.push_back(&o);
    return out;
  }
  std::vector<const SchedulerPart*> schedulers() const {
    std::vector<const SchedulerPart*> out{&v_.scheduler};
    for (const auto& s : v_.more_schedulers) out.push_back(&s);
    return out;
  }
  bool scaler_active() const { return v_.grad_scaler.found && !v_.grad_scaler.empty; }

  // DeepSpeed's FusedAdam keeps each group's count on its last parameter only (knowledge.h
  // StepWhere::kGroupLast): the largest count is the optimizer's.
  static bool counts_on_last_param(const OptimizerPart& o) {
    for (const OptimizerClass* c : o.identity.candidates) {
      if (c->step == StepWhere::kGroupLast) return true;
    }
    return false;
  }

  static std::optional<double> common_step(const OptimizerPart& o) {
    if (counts_on_last_param(o)) {
      std::optional<double> most;
      for (const auto& ps : o.state) {
        if (ps.step && (!most || *ps.step > *most)) most = ps.step;
      }
      for (const auto& g : o.groups) {
        if (g.step && (!most || *g.step > *most)) most = g.step;
      }
      return most;
    }
    for (const auto& ps : o.state) {
      if (ps.step) return ps.step;
    }
    for (const auto& g : o.groups) {
      if (g.step) return g.step;  // timm Lamb, FusedAdam keep it in the group
    }
    return std::nullopt;
  }

  // An optimizer's step against the global step, at its own cadence. Empty when they agree
  // (then `note` may say why a difference is allowed), else the problem.
  std::string cadence(const OptimizerPart& o, double step, std::string* note) const {
    const auto& gs = v_.counters.global_step;
    if (!gs || close(step, static_cast<double>(*gs))) return "";
    const double g = static_cast<double>(*gs);
    if (scaler_active() && step < g) {
      *note = "step " + fmt(step) + " <= global_step " + std::to_string(*gs) +
              ": the GradScaler skipped " + fmt(g - step) +
              " optimizer.step() calls on inf/NaN gradients (allowed with a scaler)";
      return "";
    }
    const auto all = optimizers();
    if (all.size() > 1) {
      // Optimizers without a step counter (SGD) are taken to step as often as the others.
      double sum = 0, known_sum = 0;
      size_t known = 0;
      for (const OptimizerPart* x : all) {
        if (auto s = common_step(*x)) {
          known_sum += *s;
          ++known;
        }
      }
      sum =
          known == 0 ? 0 : known_sum / static_cast<double>(known) * static_cast<double>(all.size());
      if (known > 0 && close(sum, g)) {
        *note = "global_step " + std::to_string(*gs) +
                " counts every optimizer's steps (Lightning manual optimisation): the steps of " +
                std::to_string(all.size()) + " optimizers sum to it";
        return "";
      }
      const double k = step / g;
      if (g > 0 && step > g && close(k, std::round(k))) {
        *note = fmt(std::round(k)) + " steps per global step (its own cadence, e.g. n_critic)";
        return "";
      }
      const double every = g / step;
      if (step > 0 && step < g && close(every, std::round(every))) {
        *note = "one step every " + fmt(std::round(every)) + " global steps (its own cadence)";
        return "";
      }
    }
    (void)o;
    return "optimizer step " + fmt(step) + " != global_step " + std::to_string(*gs);
  }

  struct Verdict {
    ComponentStatus status = S::kPresent;
    std::string evidence;
  };

  // The keys every candidate class keeps for a parameter of group `g` (all of them when the
  // class is certain; what they share when the shape cannot tell them apart).
  static std::vector<std::string> required_keys(const OptimizerPart& o, const GroupValues& g) {
    std::vector<std::string> out;
    const auto& cands = o.identity.candidates;
    if (cands.empty()) return out;
    for (const auto& k : required_state(*cands[0], g)) {
      bool all = true;
      for (size_t i = 1; i < cands.size(); ++i) {
        const auto r = required_state(*cands[i], g);
        all = all && std::find(r.begin(), r.end(), k) != r.end();
      }
      if (all) out.push_back(k);
    }
    return out;
  }

  // state == {}: right for a class that keeps nothing under these hyperparameters
  // (SGD / LARS with momentum 0), a fault once the run has stepped otherwise.
  Verdict judge_empty(const OptimizerPart& o) const {
    const auto& cands = o.identity.candidates;
    bool may_be_empty = !cands.empty() && !o.groups.empty();
    for (const OptimizerClass* c : cands) {
      may_be_empty = may_be_empty && c->empty == EmptyWhen::kMomentumZero;
    }
    for (const auto& g : o.groups) {
      may_be_empty = may_be_empty && !condition_holds("momentum", g.values);
    }
    if (may_be_empty) {
      return {S::kPresent, o.evidence + "; state == {}: " + o.identity.label() +
                               " with momentum 0 keeps no per-parameter state, so {} is what it "
                               "saves after any number of steps (nothing to lose)"};
    }
    const auto& gs = v_.counters.global_step;
    std::string why = "; state == {} (the optimizer never stepped, or its state was not saved)";
    if (gs && *gs > 0 && !cands.empty()) {
      std::string keeps;
      for (const auto& k : required_keys(o, o.groups.empty() ? GroupValues() : o.groups[0].values))
        keeps += (keeps.empty() ? "" : ", ") + k;
      why = "; state == {} although global_step is " + std::to_string(*gs) + ": " +
            o.identity.label() + " keeps " + (keeps.empty() ? "per-parameter state" : keeps) +
            " for every parameter from its first step, so its state was lost or never saved";
    }
    return {S::kEmpty, o.evidence + why};
  }

  Verdict judge_optimizer(const OptimizerPart& o) {
    if (o.state.empty()) return judge_empty(o);
    std::vector<std::string> problems, notes;
    std::set<int64_t> listed, with_state;
    std::map<int64_t, size_t> group_of;
    for (size_t gi = 0; gi < o.groups.size(); ++gi) {
      for (int64_t id : o.groups[gi].params) {
        listed.insert(id);
        group_of.emplace(id, gi);
      }
    }
    const bool certain = o.identity.candidates.size() == 1;
    const bool first_only = certain && o.identity.candidates[0]->first_param_only;
    const bool last_param = counts_on_last_param(o);
    std::set<double> steps;
    size_t moment_tensors = 0;
    for (const auto& ps : o.state) {
      with_state.insert(ps.id);
      if (ps.step) steps.insert(*ps.step);
      moment_tensors += ps.tensors.size();
      std::set<std::string> have = ps.keys;
      for (const auto& [k, t] : ps.tensors) have.insert(k);
      if (ps.step) have.insert("step");
      auto gi = group_of.find(ps.id);
      const GroupValues& gv = gi != group_of.end()
                                  ? o.groups[gi->second].values
                                  : (o.groups.empty() ? GroupValues() : o.groups[0].values);
      std::string lacks;
      for (const auto& k : required_keys(o, gv)) {
        if (!has_state_key(k, have)) lacks += (lacks.empty() ? "" : ", ") + k;
      }
      if (!lacks.empty() && problems.size() < 4) {
        problems.push_back("param " + std::to_string(ps.id) + " lacks " + lacks + ", which " +
                           o.identity.label() + " keeps for every parameter it stepped");
      }
    }
    std::vector<int64_t> lacking;
    for (int64_t id : listed) {
      if (with_state.count(id) == 0) lacking.push_back(id);
    }
    if (!lacking.empty() && first_only) {
      notes.push_back(o.identity.label() + " keeps its whole state on the first parameter");
    } else if (!lacking.empty()) {
      std::ostringstream e;
      e << lacking.size() << " of " << listed.size()
        << " params in param_groups have no state (first: " << lacking.front()
        << "): frozen or unused parameters (requires_grad=False, or no gradient) get none";
      notes.push_back(e.str());
      r_.findings.push_back({Severity::kInfo, C::kOptimizer, o.evidence + ": " + e.str()});
    }
    // timm's Lamb and apex's FusedAdam count in param_groups, not per parameter.
    if (steps.empty()) {
      if (auto group_step = common_step(o)) steps.insert(*group_step);
    }
    if (last_param && steps.size() > 1) {
      notes.push_back(o.identity.label() +
                      " counts each group's steps on its last parameter (the others keep the "
                      "count of their first step): the optimizer's step is the largest, " +
                      fmt(*steps.rbegin()));
      steps = {*steps.rbegin()};
    }
    for (double s : steps) {
      std::string note;
      std::string problem = cadence(o, s, &note);
      if (!problem.empty()) {
        problems.push_back(problem);
        break;
      }
      if (!note.empty()) notes.push_back(note);
      break;
    }
    if (steps.size() > 1) {
      problems.push_back("params disagree on step (" + fmt(*steps.begin()) + " .. " +
                         fmt(*steps.rbegin()) + ")");
    }
    if (!o.zero_moments.empty()) {
      // One parameter with exactly zero moments is a parameter whose gradient was exactly zero
      // at every step (a WGAN critic's output bias, a dead unit): the moments are right. All of
      // them zero is a reset.
      if (o.zero_moments.size() >= moment_tensors) {
        problems.push_back("every moment tensor (" + std::to_string(o.zero_moments.size()) +
                           ") is all zeros after steps were taken: the state was reset");
      } else {
        std::string first = *o.zero_moments.begin();
        std::string note = std::to_string(o.zero_moments.size()) + " of " +
                           std::to_string(moment_tensors) +
                           " moment tensors are exactly zero (first: " + first +
                           "): parameters whose gradient was exactly zero at every step (e.g. a "
                           "WGAN critic's output bias) keep zero moments; not a fault";
        notes.push_back(note);
        r_.findings.push_back({Severity::kInfo, C::kOptimizer, o.evidence + ": " + note});
      }
    }
    for (const auto& n : o.nonfinite) problems.push_back("moment " + n + " holds NaN/Inf");
    std::string e = o.evidence;
    if (!steps.empty()) e += "; step " + fmt(*steps.begin());
    for (const auto& n : notes) e += "; " + n;
    for (const auto& p : problems) e += "; " + p;
    return {problems.empty() ? S::kPresent : S::kInconsistent, e};
  }

  // The worst of several statuses: inconsistent, then empty, then present.
  static ComponentStatus worst(ComponentStatus a, ComponentStatus b) {
    auto rank = [](ComponentStatus s) {
      return s == S::kInconsistent ? 4
             : s == S::kEmpty      ? 3
             : s == S::kMissing    ? 2
             : s == S::kUnknown    ? 1
                                   : 0;
    };
    return rank(b) > rank(a) ? b : a;
  }

  static std::string label(const std::string& name, size_t i) {
    return name.empty() ? "#" + std::to_string(i + 1) : name;
  }

  void optimizer() {
    const OptimizerPart& o = v_.optimizer;
    if (!o.found) {
      return set(C::kOptimizer, S::kMissing,
                 o.evidence.empty() ? "no dict with state + param_groups" : o.evidence);
    }
    const auto all = optimizers();
    if (all.size() == 1) {
      Verdict v = judge_optimizer(o);
      if (o.count > 1) v.evidence += "; " + std::to_string(o.count) + " optimizers";
      return set(C::kOptimizer, v.status, v.evidence);
    }
    Verdict total;
    total.evidence = std::to_string(all.size()) + " optimizers, each audited";
    for (size_t i = 0; i < all.size(); ++i) {
      Verdict v = judge_optimizer(*all[i]);
      total.status = worst(total.status, v.status);
      total.evidence +=
          " | " + label(all[i]->name, i) + " (" + status_name(v.status) + "): " + v.evidence;
    }
    set(C::kOptimizer, total.status, total.evidence);
  }

  // The optimizer a scheduler drives: the one whose name matches once "opt"/"sched" words are
  // removed ("opt_g" ↔ "sched_g"), else the one whose group LRs equal its _last_lr, else the
  // one at the same position.
  const OptimizerPart* pair_of(const SchedulerPart& s, size_t index) const {
    const auto all = optimizers();
    for (const OptimizerPart* o : all) {
      if (!o->name.empty() && stem(o->name) == stem(s.name)) return o;
    }
    for (const OptimizerPart* o : all) {
      if (!s.last_lr.empty() && s.last_lr.size() == o->groups.size()) {
        bool same = true;
        for (size_t i = 0; i < s.last_lr.size(); ++i)
          same = same && o->groups[i].lr && close(*o->groups[i].lr, s.last_lr[i]);
        if (same) return o;
      }
    }
    return index < all.size() ? all[index] : all.front();
  }

  static std::string stem(std::string n) {
    for (const char* w : {"lr_schedulers", "lr_scheduler", "optimizer_states", "optimizers",
                          "optimizer", "schedulers", "scheduler", "sched", "optim", "opt"}) {
      for (size_t p; (p = n.find(w)) != std::string::npos;) n.erase(p, std::strlen(w));
    }
    std::string out;
    for (char c : n) {
      if (c != '_' && c != '.') out += c;
    }
    return out;
  }

  // Does a step count `le` match a saved counter (global step x k, epoch, optimizer step)?
  bool matches_counter(int64_t le, int64_t k, const OptimizerPart& o) const {
    const auto& gs = v_.counters.global_step;
    const auto& ep = v_.counters.epoch;
    auto os = common_step(o);
    return (gs && le == *gs * k) || (ep && close(static_cast<double>(le), std::floor(*ep))) ||
           (os && close(static_cast<double>(le), *os * static_cast<double>(k)));
  }

  std::string counters_text() const {
    const auto& c = v_.counters;
    std::string t;
    if (c.global_step)
      t += (c.step_key.empty() ? "global_step" : c.step_key) + " " + std::to_string(*c.global_step);
    if (c.epoch) t += (t.empty() ? "epoch " : ", epoch ") + fmt(*c.epoch);
    return t.empty() ? "no counter" : t;
  }

  // ReduceLROnPlateau counts its step(metric) calls: per epoch or per evaluation, as the loop
  // chooses. Against the evaluation count when the format records one; otherwise it is right if
  // it matches a counter, and undecided if it matches none.
  Verdict judge_plateau(const SchedulerPart& s, const OptimizerPart& o) const {
    Verdict v{S::kPresent, s.evidence};
    if (!s.last_epoch) return v;
    const int64_t le = *s.last_epoch;
    const auto& evals = v_.counters.evaluations;
    if (evals && le == *evals) {
      v.evidence += "; steps once per evaluation: last_epoch " + std::to_string(le) +
                    " == " + std::to_string(*evals) + " evaluations in log_history";
    } else if (evals && le < *evals) {
      v.status = S::kInconsistent;
      v.evidence += "; last_epoch " + std::to_string(le) + " < " + std::to_string(*evals) +
                    " evaluations in log_history: the plateau scheduler missed evaluations (its "
                    "state was reset or not loaded at a resume)";
    } else if (matches_counter(le, 1, o)) {
      v.evidence += "; steps once per epoch or step (last_epoch matches " + counters_text() + ")";
    } else {
      v.status = S::kUnknown;
      v.evidence += "; last_epoch " + std::to_string(le) +
                    " counts its step(metric) calls and matches no saved counter (" +
                    counters_text() +
                    "); deciding needs the number of evaluations the run made (e.g. HF "
                    "trainer_state.json log_history)";
    }
    return v;
  }

  Verdict judge_scheduler(const SchedulerPart& s, const OptimizerPart& o, bool several,
                          const std::vector<const SchedulerPart*>& siblings) const {
    std::vector<std::string> problems;
    const auto& gs = v_.counters.global_step;
    const auto& ep = v_.counters.epoch;
    auto os = common_step(o);
    if (s.klass != nullptr && s.klass->cadence == Cadence::kRecomputed) {
      return {v_.counters.found ? S::kPresent : S::kUnknown,
              s.evidence + (v_.counters.found
                                ? "; the LR follows from " + counters_text()
                                : "; no counter saved to recompute the LR from: deciding needs "
                                  "the epoch or update count")};
    }
    Verdict plateau;
    const bool is_plateau = s.klass != nullptr && s.klass->cadence == Cadence::kPerMetric;
    if (is_plateau) plateau = judge_plateau(s, o);
    if (s.last_epoch && !is_plateau) {
      int64_t le = *s.last_epoch;
      const int64_t k = std::max<int64_t>(1, s.steps_per_step);
      const std::string times = k == 1 ? "" : std::to_string(k) + " x ";
      bool matches_epoch = ep && close(static_cast<double>(le), std::floor(*ep));
      bool matches_opt = os && close(static_cast<double>(le), *os * static_cast<double>(k));
      if (!siblings.empty() && !matches_counter(le, k, o)) {
        // Schedulers that take turns on one optimizer (torch's SWA recipe: the main schedule
        // until swa_start, SWALR after) split the count between them.
        int64_t sum = le;
        for (const SchedulerPart* x : siblings) sum += x->last_epoch.value_or(0);
        if (matches_counter(sum, k, o)) {
          problems.clear();
        } else {
          return {S::kUnknown,
                  s.evidence + "; last_epoch " + std::to_string(le) +
                      " matches no saved counter (" + counters_text() +
                      "), alone or summed with "
                      "the other schedulers of its optimizer; deciding needs each scheduler's "
                      "cadence (per step, per epoch, from which epoch on)"};
        }
      } else if (several && (matches_opt || matches_epoch || (gs && le == *gs * k))) {
        // Each pair at its own cadence: the scheduler steps with its optimizer.
      } else if (loop_counted()) {
        // The loop's own count of scheduler steps equals the schedulers' counts (Lightning's
        // scheduler_progress): every step it made was restored and counted, whatever the cadence
        // (a per-epoch scheduler saved at an epoch's end stands at epoch + 1); loop_count says so.
      } else if (gs) {
        if (le != *gs * k && !matches_epoch) {
          problems.push_back("last_epoch " + std::to_string(le) + " != " + times + "global_step " +
                             std::to_string(*gs) + (ep ? " (and != epoch " + fmt(*ep) + ")" : ""));
        }
      } else if (os && !s.per_epoch && !matches_opt && !matches_epoch) {
        problems.push_back("last_epoch " + std::to_string(le) + " != " + times + "optimizer step " +
                           fmt(std::round(*os)));
      }
    }
    std::string lr_note;
    for (size_t i = 0; i < s.last_lr.size() && i < o.groups.size(); ++i) {
      if (!o.groups[i].lr || close(*o.groups[i].lr, s.last_lr[i])) continue;
      // Several schedulers on one optimizer: the group's LR is the _last_lr of the one that
      // stepped last (chainable schedulers build on the group's LR), not of every one.
      const SchedulerPart* last = nullptr;
      for (const SchedulerPart* x : siblings) {
        if (i < x->last_lr.size() && close(*o.groups[i].lr, x->last_lr[i])) last = x;
      }
      if (last != nullptr) {
        lr_note = "; param_groups[" + std::to_string(i) + "].lr " + fmt(*o.groups[i].lr) +
                  " is the _last_lr of " + (last->name.empty() ? last->kind : last->name) +
                  ", the scheduler of the same optimizer that stepped last";
        continue;
      }
      problems.push_back(
          "param_groups[" + std::to_string(i) + "].lr " + fmt(*o.groups[i].lr) + " != _last_lr[" +
          std::to_string(i) + "] " + fmt(s.last_lr[i]) +
          (siblings.empty() ? "" : " (nor the _last_lr of the other schedulers of its optimizer)"));
    }
    std::string e = (is_plateau ? plateau.evidence : s.evidence) + lr_note;
    for (const auto& p : problems) e += "; " + p;
    if (!problems.empty()) return {S::kInconsistent, e};
    return {is_plateau ? plateau.status : S::kPresent, e};
  }

  // No scheduler was ever attached to the saved optimizers: torch's LRScheduler (and timm's and
  // mmengine's schedulers) write param_groups[i]["initial_lr"] when they are made, and no group
  // has it. The LR is the group's own, restored with the optimizer. Empty when that is not
  // established (no optimizer, or groups whose keys were not read).
  std::string never_scheduled() const {
    if (!v_.optimizer.found) return "";
    size_t groups = 0;
    for (const OptimizerPart* o : optimizers()) {
      for (const auto& g : o->groups) {
        if (g.values.present.count("lr") == 0 || g.values.present.count("initial_lr") != 0)
          return "";
        ++groups;
      }
    }
    if (groups == 0) return "";
    return "no scheduler was ever attached: a torch / timm / mmengine LR scheduler writes "
           "param_groups[i]['initial_lr'] when it is made, and none of the " +
           std::to_string(groups) +
           " param group(s) has it; the LR is the group's own lr, restored with the optimizer";
  }

  void scheduler() {
    const SchedulerPart& s = v_.scheduler;
    if (!s.found) {
      if (!s.recomputed.empty()) {
        if (v_.counters.found)
          return set(C::kScheduler, S::kDerived,
                     s.recomputed + "; the counter it follows is saved (" + counters_text() + ")");
        return set(C::kScheduler, S::kMissing,
                   s.recomputed + ", but no counter is saved to recompute it from");
      }
      if (s.evidence.empty() && !never_scheduled().empty())
        return set(C::kScheduler, S::kNotApplicable, never_scheduled());
      return set(C::kScheduler, S::kMissing,
                 s.evidence.empty()
                     ? "no dict with last_epoch + base_lrs (or ReduceLROnPlateau's shape)"
                     : s.evidence);
    }
    const auto all = schedulers();
    const bool several = all.size() > 1 || optimizers().size() > 1;
    if (all.size() == 1 && optimizers().size() == 1) {
      std::vector<Verdict> v{judge_scheduler(s, v_.optimizer, false, {})};
      v[0].evidence += loop_count(all, &v);
      return set(C::kScheduler, v[0].status, v[0].evidence);
    }
    std::vector<const OptimizerPart*> paired;
    for (size_t i = 0; i < all.size(); ++i) paired.push_back(pair_of(*all[i], i));
    std::vector<Verdict> verdicts;
    for (size_t i = 0; i < all.size(); ++i) {
      std::vector<const SchedulerPart*> siblings;
      for (size_t j = 0; j < all.size(); ++j) {
        if (j != i && paired[j] == paired[i]) siblings.push_back(all[j]);
      }
      verdicts.push_back(judge_scheduler(*all[i], *paired[i], several, siblings));
    }
    Verdict total;
    total.evidence = std::to_string(all.size()) + " scheduler(s), each paired with its optimizer" +
                     loop_count(all, &verdicts);
    for (size_t i = 0; i < all.size(); ++i) {
      const OptimizerPart* o = paired[i];
      const Verdict& v = verdicts[i];
      total.status = worst(total.status, v.status);
      size_t oi = 0;
      for (const auto& x : optimizers()) {
        if (x == o) break;
        ++oi;
      }
      total.evidence += " | " + label(all[i]->name, i) + " -> " + label(o->name, oi) + " (" +
                        status_name(v.status) + "): " + v.evidence;
    }
    set(C::kScheduler, total.status, total.evidence);
  }

  // Whether the loop's own count of scheduler steps is saved and equals the sum of every
  // scheduler's count (see loop_count).
  bool loop_counted() const {
    const auto& n = v_.counters.scheduler_steps;
    const auto sum = counts_sum(schedulers());
    return n && *n > 0 && sum && *sum == *n;
  }

  // The sum of the schedulers' own counts (last_epoch); nullopt when one has none.
  static std::optional<int64_t> counts_sum(const std::vector<const SchedulerPart*>& all) {
    int64_t sum = 0;
    for (const SchedulerPart* s : all) {
      if (!s->last_epoch) return std::nullopt;
      sum += *s->last_epoch;
    }
    return sum;
  }

  // The loop's own count of scheduler.step() calls (Lightning's scheduler_progress) against the
  // schedulers' counts, which each step() advances by one: equal, every scheduler was restored
  // and stepped, which settles a cadence the rule above could not place; fewer, a scheduler
  // started over at a resume (its state was not restored) and lost the difference. More (steps
  // the loop did not make, e.g. by hand) decides nothing. Adjusts `verdicts`; returns the note
  // for the evidence.
  std::string loop_count(const std::vector<const SchedulerPart*>& all,
                         std::vector<Verdict>* verdicts) const {
    const auto& n = v_.counters.scheduler_steps;
    const auto total = counts_sum(all);
    if (!n || *n <= 0 || !total) return "";
    const int64_t sum = *total;
    std::string terms;
    for (const SchedulerPart* s : all) {
      terms += (terms.empty() ? "" : " + ") + std::to_string(*s->last_epoch);
    }
    const std::string counts = "the schedulers' own counts (" + terms + " = " +
                               std::to_string(sum) + ") against the " + std::to_string(*n) +
                               " scheduler steps the loop made (" +
                               v_.counters.scheduler_steps_source + ")";
    if (sum == *n) {
      for (Verdict& v : *verdicts) {
        if (v.status != S::kUnknown) continue;
        v.status = S::kPresent;
        v.evidence +=
            "; settled by the loop's count: every scheduler step it made is in a "
            "scheduler's count";
      }
      return "; " + counts + ": equal, each scheduler was restored and stepped";
    }
    if (sum > *n) return "; " + counts + ": more than the loop made, which decides nothing";
    // Which lost the steps: the schedulers whose count matched no counter; all, if none.
    bool any_unknown = false;
    for (const Verdict& v : *verdicts) any_unknown = any_unknown || v.status == S::kUnknown;
    const std::string lost = "; " + counts + ": " + std::to_string(*n - sum) +
                             " steps short, so a scheduler started over at a resume (its state "
                             "was not restored) and its LR follows a schedule the run left";
    for (Verdict& v : *verdicts) {
      if (any_unknown && v.status != S::kUnknown) continue;
      v.status = S::kInconsistent;
      v.evidence += lost;
    }
    return "";
  }

  void rng_cpu() {
    const RngCpuPart& r = v_.rng_cpu;
    if (!r.found) {
      auto gap = v_.format_gaps.find(C::kRngCpu);
      return set(
          C::kRngCpu, S::kMissing,
          gap != v_.format_gaps.end() ? gap->second : "no 5056-byte uint8 CPU generator state");
    }
    if (r.nbytes != 5056) {
      return set(C::kRngCpu, S::kInconsistent,
                 r.evidence + "; " + std::to_string(r.nbytes) + " bytes, expected 5056");
    }
    set(C::kRngCpu, S::kPresent, r.evidence);
  }

  void rng_cuda() {
    const RngCudaPart& r = v_.rng_cuda;
    std::set<std::string> cuda;
    for (const auto& d : v_.devices) {
      if (d.rfind("cuda", 0) == 0) cuda.insert(d);
    }
    if (r.found) {
      for (int64_t n : r.nbytes) {
        if (n != 16 && n != 8 && n != 816) {
          return set(
              C::kRngCuda, S::kInconsistent,
              r.evidence + "; a " + std::to_string(n) + "-byte state (expected 16, 8 or 816)");
        }
      }
      return set(C::kRngCuda, S::kPresent, r.evidence);
    }
    if (!cuda.empty()) {
      return set(C::kRngCuda, S::kMissing,
                 "tensors were stored from " + *cuda.begin() +
                     ": the run used CUDA, but no CUDA generator state is saved");
    }
    auto gap = v_.format_gaps.find(C::kRngCuda);
    if (!v_.cpu_only_reason.empty()) {
      return set(C::kRngCuda, S::kNotApplicable,
                 v_.cpu_only_reason + ": a CPU run, no CUDA generator to restore");
    }
    if (v_.devices_known) {
      return set(C::kRngCuda, S::kNotApplicable,
                 "every tensor was stored from the CPU: no CUDA generator to restore");
    }
    set(C::kRngCuda, S::kMissing,
        gap != v_.format_gaps.end() ? gap->second
                                    : "no CUDA generator state, and the format does not record "
                                      "devices, so a CUDA run cannot be ruled out");
  }

  void loader() {
    const LoaderPart& l = v_.loader;
    if (l.found) {
      const auto& gs = v_.counters.global_step;
      if (l.samples && gs && *gs > 0 && *l.samples < *gs) {
        return set(C::kLoader, S::kInconsistent,
                   l.evidence + "; samples_seen " + std::to_string(*l.samples) + " < global_step " +
                       std::to_string(*gs) + " (each step consumes at least one sample)");
      }
      return set(C::kLoader, S::kPresent, l.evidence);
    }
    if (l.derived) {
      ComponentReport& c = get(C::kLoader);
      c.status = S::kDerived;
      c.evidence = l.evidence + (l.derive_cost.empty() ? "" : "; cost: " + l.derive_cost);
      return;
    }
    if (!l.evidence.empty()) return set(C::kLoader, S::kMissing, l.evidence);
    auto gap = v_.format_gaps.find(C::kLoader);
    if (gap != v_.format_gaps.end()) return set(C::kLoader, S::kMissing, gap->second);
    set(C::kLoader, S::kMissing,
        v_.counters.epoch && !v_.counters.global_step
            ? "only an epoch count; no batch or sample cursor"
            : "no loader state (no sampler or cursor)");
  }

  void counters() {
    const CountersPart& c = v_.counters;
    if (!c.found) {
      return set(C::kCounters, S::kMissing,
                 c.evidence.empty() ? "no global step or epoch counter" : c.evidence);
    }
    std::string e = c.evidence;
    if (!c.global_step) e += " (no global step)";
    set(C::kCounters, S::kPresent, e);
  }

  void grad_scaler() {
    const GradScalerPart& g = v_.grad_scaler;
    if (g.found) return set(C::kGradScaler, g.empty ? S::kEmpty : S::kPresent, g.evidence);
    if (v_.mixed_precision && !v_.no_scaler_reason.empty())
      return set(C::kGradScaler, S::kNotApplicable, v_.no_scaler_reason);
    if (!v_.mixed_precision) {
      return set(C::kGradScaler, S::kNotApplicable, "no fp16 mixed precision detected");
    }
    set(C::kGradScaler, S::kMissing,
        v_.mixed_precision_evidence + ", but no GradScaler state is saved");
  }

  const CheckpointView& v_;
  AuditReport& r_;
};

}  // namespace

const ComponentReport* AuditReport::find(AuditComponent c) const {
  for (const auto& r : components) {
    if (r.component == c) return &r;
  }
  return nullptr;
}

AuditReport apply_rules(const CheckpointView& view, const std::set<AuditComponent>& required) {
  AuditReport r;
  r.path = view.path;
  r.format = view.format;
  r.bytes_read = view.bytes_read;
  for (AuditComponent name : kAuditComponents)
    r.components.push_back({name, S::kMissing, "", "", "", true});
  Judge(view, &r).run();
  bool complete = true;
  for (auto& c : r.components) {
    c.required = required.empty() || required.count(c.component) != 0;
    if (status_is_ok(c.status)) {
      if (c.status == S::kDerived) r.findings.push_back({Severity::kInfo, c.component, c.evidence});
      if (c.status == S::kUnknown) {
        r.findings.push_back({Severity::kWarning, c.component,
                              std::string(component_name(c.component)) +
                                  " unknown (the rule could not decide): " + c.evidence});
      }
      continue;
    }
    const Advice& a = advice().at(c.component);
    c.consequence =
        c.status == S::kInconsistent && a.inconsistent != nullptr ? a.inconsistent : a.consequence;
    c.fix = a.fix;
    if (c.required) complete = false;
    r.findings.push_back({c.required ? Severity::kError : Severity::kWarning, c.component,
                          std::string(component_name(c.component)) + " " + status_name(c.status) +
                              ": " + c.evidence + " — " + c.consequence});
  }
  for (const ReaderFinding& f : view.findings) {
    Severity sev = f.severity;
    if (sev == Severity::kError && f.component && !required.empty() &&
        required.count(*f.component) == 0) {
      sev = Severity::kWarning;
    }
    if (sev == Severity::kError) complete = false;
    r.findings.push_back({sev, f.component, f.message});
  }
  r.complete = complete;
  return r;
}

}  // namespace ckpt::verify
