#include "verify/formats/megatron_state.h"

#include <cmath>
#include <sstream>
#include <tuple>

#include "verify/formats/detect.h"

namespace ckpt::verify {
namespace {

using C = AuditComponent;

// An argparse.Namespace pickles as an object whose BUILD state is its __dict__.
const Value* arg(const Value* args, const std::string& name) {
  if (args == nullptr) return nullptr;
  if (args->kind == Kind::kDict) return args->get(name);
  if (args->kind == Kind::kObject && args->state != nullptr) return args->state->get(name);
  return nullptr;
}

bool truthy(const Value* v) { return v != nullptr && v->as_int().value_or(0) != 0; }

std::string fmt(double x) {
  std::ostringstream o;
  o.precision(6);
  o << x;
  return o.str();
}

std::optional<double> number(const Value* d, const char* key) {
  const Value* v = d != nullptr ? d->get(key) : nullptr;
  return v != nullptr ? v->as_number() : std::nullopt;
}

std::string text(const Value* d, const char* key) {
  const Value* v = d != nullptr ? d->get(key) : nullptr;
  return v != nullptr && v->kind == Kind::kStr ? v->s : "";
}

// The param_groups list of Megatron's optimizer state dict: torch's own (FP32Optimizer), or
// under "optimizer" (the float16 and distributed optimizers wrap it).
const Value* param_groups(const Value* opt) {
  for (int i = 0; opt != nullptr && i < 2; ++i) {
    const Value* g = opt->get("param_groups");
    if (g != nullptr && g->kind == Kind::kList) return g;
    opt = opt->get("optimizer");
  }
  return nullptr;
}

// OptimizerParamScheduler.get_lr (megatron/core/optimizer_param_scheduler.py) for the decay
// styles whose whole state is in its state_dict; nullopt for the others (WSD needs
// wsd_decay_steps, which it does not save).
std::optional<double> megatron_lr(const Value& sched, const Value* group, double init_lr) {
  auto max_lr = number(group, "max_lr");
  auto min_lr = number(group, "min_lr");
  if (!max_lr) max_lr = number(&sched, "max_lr");
  if (!min_lr) min_lr = number(&sched, "min_lr");
  auto warmup = number(&sched, "lr_warmup_steps");
  auto steps = number(&sched, "num_steps");
  auto decay = number(&sched, "lr_decay_steps");
  const std::string style = text(&sched, "lr_decay_style");
  if (!max_lr || !min_lr || !warmup || !steps || !decay) return std::nullopt;
  if (*warmup > 0 && *steps <= *warmup) return init_lr + (*max_lr - init_lr) * *steps / *warmup;
  if (style == "constant") return *max_lr;
  if (*steps > *decay) return *min_lr;
  if (style == "inverse-square-root") {
    const double w = std::max(*warmup, 1.0), n = std::max(*steps, 1.0);
    return std::max(*min_lr, *max_lr * std::sqrt(w) / std::sqrt(n));
  }
  if (*decay <= *warmup) return std::nullopt;
  const double ratio = (*steps - *warmup) / (*decay - *warmup);
  double coeff;
  if (style == "linear") {
    coeff = 1.0 - ratio;
  } else if (style == "cosine") {
    coeff = 0.5 * (std::cos(M_PI * ratio) + 1.0);
  } else {
    return std::nullopt;
  }
  return *min_lr + coeff * (*max_lr - *min_lr);
}

bool close(double a, double b) {
  return std::fabs(a - b) <= 1e-6 * std::max(std::fabs(a), std::fabs(b)) + 1e-15;
}

class MegatronState {
 public:
  MegatronState(const Value& root, const std::string& label, CheckpointView* view)
      : root_(root), label_(label), view_(*view), args_(root.get("args")) {}

  void run() {
    if (args_ != nullptr && !view_.config_digest) view_.config_digest = value_digest(*args_);
    gbs_ = constant_global_batch();
    counters();
    loader();
    scheduler();
    optimizer();
    rng();
    grad_scaler();
  }

 private:
  // The global batch when it is the same at every iteration (no --rampup-batch-size).
  std::optional<int64_t> constant_global_batch() const {
    const Value* rampup = arg(args_, "rampup_batch_size");
    if (rampup != nullptr && rampup->kind != Kind::kNone) return std::nullopt;
    const Value* g = arg(args_, "global_batch_size");
    auto v = g != nullptr ? g->as_int() : std::nullopt;
    return v && *v > 0 ? v : std::nullopt;
  }

  void finding(C component, const std::string& message) {
    view_.findings.push_back({Severity::kError, component, message, true});
  }

  void counters() {
    const Value* it = root_.get("iteration");
    if (it == nullptr || !it->as_int()) return;
    iteration_ = *it->as_int();
    CountersPart& c = view_.counters;
    c.found = true;
    c.global_step = iteration_;
    c.source = label_;
    c.evidence = label_ + ": iteration " + std::to_string(*iteration_);
    if (auto flops = number(&root_, "num_floating_point_operations_so_far"))
      c.evidence += ", num_floating_point_operations_so_far " + fmt(*flops);
  }

  void loader() {
    if (view_.loader.found) return;
    const Value* consumed = arg(args_, "consumed_train_samples");
    LoaderPart& l = view_.loader;
    if (consumed == nullptr || !consumed->as_int()) {
      l.evidence = args_ == nullptr
                       ? "no args in " + label_ +
                             ": Megatron keeps the data cursor in args.consumed_train_samples"
                       : "args has no consumed_train_samples: Megatron's sampler would start "
                         "again at sample 0";
      return;
    }
    l.found = true;
    l.kind = "Megatron consumed_train_samples";
    l.samples = *consumed->as_int();
    l.source = label_;
    l.evidence = label_ + ": args.consumed_train_samples " + std::to_string(*l.samples) +
                 " (MegatronPretrainingSampler resumes at this sample; nothing is replayed)";
    if (gbs_ && iteration_ && *l.samples != *iteration_ * *gbs_) {
      finding(C::kLoader, "args.consumed_train_samples " + std::to_string(*l.samples) +
                              " != iteration " + std::to_string(*iteration_) +
                              " x global_batch_size " + std::to_string(*gbs_) + " = " +
                              std::to_string(*iteration_ * *gbs_) +
                              ": the sampler resumes at another sample than the run reached");
    }
  }

  void scheduler() {
    const Value* s = root_.get("opt_param_scheduler");
    if (s == nullptr) s = root_.get("lr_scheduler");  // before Megatron-LM renamed it
    SchedulerPart& part = view_.scheduler;
    if (s == nullptr || s->kind != Kind::kDict || s->get("num_steps") == nullptr) {
      if (!part.found) {
        part.evidence =
            std::string(truthy(arg(args_, "no_save_optim")) ? "saved with --no-save-optim: " : "") +
            "no opt_param_scheduler: with --no-load-optim Megatron's LR schedule restarts at "
            "num_steps 0, back into warmup";
      }
      return;
    }
    const std::string style = text(s, "lr_decay_style");
    const auto steps = number(s, "num_steps");
    part = SchedulerPart{};
    part.found = true;
    part.name = "opt_param_scheduler";
    part.kind = "Megatron OptimizerParamScheduler (" + style + ")";
    part.source = label_;
    if (auto m = number(s, "max_lr")) part.base_lrs = {*m};
    std::string e = label_ + ": opt_param_scheduler (Megatron OptimizerParamScheduler) " + style +
                    ", num_steps " + fmt(steps.value_or(-1)) + " samples";
    const int64_t n = static_cast<int64_t>(steps.value_or(-1));
    if (gbs_ && steps && n % *gbs_ == 0) {
      part.last_epoch = n / *gbs_;
      e += " (" + std::to_string(n / *gbs_) + " iterations of global batch " +
           std::to_string(*gbs_) + ")";
    }
    e += ", warmup " + fmt(number(s, "lr_warmup_steps").value_or(-1)) + ", decay " +
         fmt(number(s, "lr_decay_steps").value_or(-1)) + ", max_lr " +
         fmt(number(s, "max_lr").value_or(-1)) + ", min_lr " +
         fmt(number(s, "min_lr").value_or(-1));
    part.evidence = e;
    check_lr(*s);
  }

  // The LR each param group holds against the one Megatron's schedule gives at num_steps.
  void check_lr(const Value& s) {
    const Value* groups = param_groups(root_.get("optimizer"));
    if (groups == nullptr) return;
    double init_lr = 0;
    if (const Value* w = arg(args_, "lr_warmup_init"); w != nullptr && w->as_number())
      init_lr = *w->as_number();
    for (size_t i = 0; i < groups->items.size(); ++i) {
      const Value* g = groups->items[i];
      auto lr = number(g, "lr");
      auto want = megatron_lr(s, g, init_lr);
      if (!lr || !want) continue;
      if (i == 0) view_.scheduler.evidence += "; LR at num_steps " + fmt(*want);
      if (!close(*lr, *want)) {
        finding(C::kScheduler, "param_groups[" + std::to_string(i) + "].lr " + fmt(*lr) + " != " +
                                   fmt(*want) + ", the LR Megatron's schedule gives at num_steps " +
                                   fmt(number(&s, "num_steps").value_or(-1)) +
                                   ": the LR jumps at the first step after a resume");
      }
    }
  }

  void optimizer() {
    if (view_.optimizer.found) return;
    view_.optimizer.evidence =
        std::string(truthy(arg(args_, "no_save_optim"))
                        ? "saved with --no-save-optim (args.no_save_optim=True)"
                        : "no optimizer in " + label_) +
        ": Megatron's load_checkpoint stops ('Unable to load optimizer from checkpoint ... "
        "Specify --no-load-optim or --finetune'); with --no-load-optim the Adam moments restart "
        "at zero";
  }

  // rng_state: a list (legacy) or {shard: list} (torch_dist ShardedObject), one dict per
  // data-parallel rank with --data-parallel-random-init, else one.
  void rng() {
    const Value* rs = root_.get("rng_state");
    if (rs == nullptr) {
      const std::string why =
          std::string(truthy(arg(args_, "no_save_rng")) ? "saved with --no-save-rng: " : "") +
          "no rng_state: Megatron's load_checkpoint exits ('Unable to load rng state from "
          "checkpoint ... Specify --no-load-rng or --finetune'); with --no-load-rng the random, "
          "numpy, torch and CUDA generators and the tensor-parallel RNG tracker start again from "
          "--seed: dropout repeats the masks of the run's first steps";
      // Recorded as a gap of this save (the rules word a missing RNG with it).
      if (!view_.rng_cpu.found) view_.format_gaps[C::kRngCpu] = why;
      if (!view_.rng_cuda.found) view_.format_gaps[C::kRngCuda] = why;
      return;
    }
    std::vector<const Value*> entries;
    std::string where = "rng_state";
    if (rs->kind == Kind::kList) {
      flatten(*rs, &entries, 0);
    } else if (rs->kind == Kind::kDict) {
      // torch_dist: one ShardedObject shard per (pp, tp) rank, "shard_<offsets>_<shape>".
      const int64_t want = shard_count(rs->entries.empty() ? "" : rs->entries.front().first->s);
      where = "rng_state (" + std::to_string(rs->entries.size()) + " of " +
              (want > 0 ? std::to_string(want) : std::string("?")) + " shard(s))";
      if (want > 0 && static_cast<int64_t>(rs->entries.size()) < want) {
        finding(C::kRngCpu, "rng_state has " + std::to_string(rs->entries.size()) + " of " +
                                std::to_string(want) +
                                " (pipeline x tensor) shards: those ranks resume unseeded");
      }
      for (const auto& [k, v] : rs->entries) flatten(*v, &entries, 0);
    }
    const Value* first = entries.empty() ? nullptr : entries.front();
    const Value* tracker = first != nullptr ? first->get("rng_tracker_states") : nullptr;
    if (view_.rng_cpu.found)
      view_.rng_cpu.evidence += "; " + where + ": " + std::to_string(entries.size()) + " entr" +
                                (entries.size() == 1 ? "y" : "ies");
    if (tracker == nullptr || tracker->kind != Kind::kDict) return;
    std::string names;
    for (const auto& [k, v] : tracker->entries) {
      if (k->kind == Kind::kStr) names += (names.empty() ? "" : ", ") + k->s;
    }
    if (view_.rng_cuda.found) {
      view_.rng_cuda.evidence +=
          "; tensor-parallel RNG tracker: " + std::to_string(tracker->entries.size()) +
          " state(s) (" + names + ")";
    }
    if (tracker->entries.empty()) {
      finding(C::kRngCuda,
              "rng_state[0].rng_tracker_states is empty: Megatron's load_checkpoint takes that "
              "as no RNG state and exits ('Unable to load rng state ...')");
    }
  }

  static void flatten(const Value& v, std::vector<const Value*>* out, int depth) {
    if (v.kind == Kind::kDict) {
      out->push_back(&v);
    } else if ((v.kind == Kind::kList || v.kind == Kind::kTuple) && depth < 4) {
      for (const Value* x : v.items) flatten(*x, out, depth + 1);
    }
  }

  // "shard_0.0_1.2" → 1 x 2 = 2 shards; 0 when the key is not shaped so.
  static int64_t shard_count(const std::string& key) {
    const size_t u = key.rfind('_');
    if (key.compare(0, 6, "shard_") != 0 || u == std::string::npos || u < 6) return 0;
    int64_t n = 1;
    std::stringstream ss(key.substr(u + 1));
    int parts = 0;
    for (std::string d; std::getline(ss, d, '.') && parts < 8; ++parts) {
      if (d.empty() || d.size() > 6 || d.find_first_not_of("0123456789") != std::string::npos)
        return 0;
      n *= std::stoll(d);
    }
    return parts > 0 ? n : 0;
  }

  // fp16 runs keep the loss scaler inside the optimizer state ({"grad_scaler": {"scale", ...}}).
  void grad_scaler() {
    if (!truthy(arg(args_, "fp16"))) return;
    view_.mixed_precision = true;
    view_.mixed_precision_evidence = label_ + ": args.fp16=True";
    const Value* opt = root_.get("optimizer");
    const Value* gs = opt != nullptr ? opt->get("grad_scaler") : nullptr;
    if (gs == nullptr || gs->kind != Kind::kDict || gs->get("scale") == nullptr) return;
    GradScalerPart& g = view_.grad_scaler;
    g.found = true;
    g.source = label_;
    g.evidence = label_ + ": optimizer.grad_scaler (" + std::to_string(gs->entries.size()) +
                 " entries: scale, growth and hysteresis trackers)";
  }

  const Value& root_;
  const std::string label_;
  CheckpointView& view_;
  const Value* args_;
  std::optional<int64_t> gbs_, iteration_;
};

}  // namespace

void add_megatron_state(const Value& root, const std::string& label, CheckpointView* view) {
  MegatronState(root, label, view).run();
}

namespace {

std::string int_text(const Value& v) {
  return v.as_int() ? std::to_string(*v.as_int()) : summarize(v);
}

// Each rank's own generator states: the CPU state is 5056 bytes, a CUDA state 16.
void check_rank_rng(const MegatronRankFile& f, CheckpointView* view) {
  const Value* rs = f.root->get("rng_state");
  if (rs == nullptr || rs->kind != Kind::kList) return;
  for (size_t i = 0; i < rs->items.size(); ++i) {
    const Value* e = rs->items[i];
    for (const auto& [key, want, component] :
         {std::tuple<const char*, int64_t, C>{"torch_rng_state", 5056, C::kRngCpu},
          std::tuple<const char*, int64_t, C>{"cuda_rng_state", 16, C::kRngCuda}}) {
      const Value* t = e->get(key);
      if (t == nullptr || t->kind != Kind::kTensor) continue;
      const int64_t n = t->tensor->shape.size() == 1 ? t->tensor->shape[0] : -1;
      if (n != want && !(want == 16 && (n == 8 || n == 816))) {
        view->findings.push_back({Severity::kError, component,
                                  f.label + ": rng_state[" + std::to_string(i) + "]." + key +
                                      " is " + std::to_string(n) + " bytes, expected " +
                                      std::to_string(want),
                                  true});
      }
    }
  }
}

}  // namespace

namespace {

// A rank file that is missing or does not parse took what its siblings show a rank file holds:
// its own share of the model and of the optimizer's moments and its own generators (those
// components are inconsistent), and copies of the scheduler, iteration and args (named; the
// values survive in the readable files, but that rank's load_checkpoint stops).
void lost_rank(const MegatronRankFile& f, const MegatronRankFile* sibling, CheckpointView* view) {
  if (sibling == nullptr) {
    view->findings.push_back({Severity::kError, C::kModel, f.label + ": " + f.error, true});
    return;
  }
  static const struct {
    const char* key;
    AuditComponent component;
    const char* what;
  } kOwn[] = {{"model", C::kModel, "its tensor-parallel share of every split weight"},
              {"optimizer", C::kOptimizer, "its share of the optimizer's moments"},
              {"rng_state", C::kRngCpu, "its own CPU generator states"},
              {"rng_state", C::kRngCuda, "its own CUDA generator and RNG-tracker states"}};
  for (const auto& own : kOwn) {
    if (sibling->root->get(own.key) == nullptr) continue;
    view->findings.push_back({Severity::kError, own.component,
                              f.label + ": " + f.error + ": it held " + own.key + ", " + own.what +
                                  " (" + sibling->label + " holds its own)",
                              true});
  }
  std::string copies;
  for (const char* key : {"opt_param_scheduler", "iteration", "args", "checkpoint_version"}) {
    if (sibling->root->get(key) != nullptr)
      copies += (copies.empty() ? "" : ", ") + std::string(key);
  }
  if (!copies.empty()) {
    view->findings.push_back({Severity::kError, std::nullopt,
                              f.label + ": " + f.error + ": it also held that rank's copy of " +
                                  copies + " (the values survive in " + sibling->label +
                                  "); that rank's load_checkpoint stops without the file",
                              false});
  }
}

}  // namespace

void check_megatron_ranks(const std::vector<MegatronRankFile>& ranks, CheckpointView* view) {
  static const std::pair<const char*, AuditComponent> kKeys[] = {
      {"model", C::kModel},
      {"optimizer", C::kOptimizer},
      {"opt_param_scheduler", C::kScheduler},
      {"rng_state", C::kRngCpu},
      {"iteration", C::kCounters}};
  const MegatronRankFile* first = nullptr;
  for (const auto& f : ranks) {
    if (f.root != nullptr && first == nullptr) first = &f;
  }
  for (const auto& f : ranks) {
    if (f.root == nullptr) lost_rank(f, first, view);
  }
  if (first == nullptr) return;
  // A key some rank holds and another lacks: that rank resumes without it.
  for (const auto& [key, component] : kKeys) {
    const MegatronRankFile* holder = nullptr;
    for (const auto& f : ranks) {
      if (f.root != nullptr && f.root->get(key) != nullptr) holder = holder ? holder : &f;
    }
    if (holder == nullptr) continue;
    for (const auto& f : ranks) {
      if (f.root == nullptr || f.root->get(key) != nullptr) continue;
      view->findings.push_back({Severity::kError, component,
                                f.label + " has no " + key + " (" + holder->label +
                                    " has): that rank resumes without it",
                                true});
    }
  }
  int with_rng = 0;
  for (const auto& f : ranks) {
    if (f.root == nullptr) continue;
    with_rng += f.root->get("rng_state") != nullptr ? 1 : 0;
    check_rank_rng(f, view);
    const Value* a = first->root->get("iteration");
    const Value* b = f.root->get("iteration");
    if (a != nullptr && b != nullptr && a->as_int() != b->as_int()) {
      view->findings.push_back(
          {Severity::kError, C::kCounters,
           f.label + ": iteration " + int_text(*b) + " != " + int_text(*a) + " in " + first->label,
           true});
    }
  }
  if (ranks.size() > 1 && with_rng > 0) {
    std::string names;
    for (const auto& f : ranks) names += (names.empty() ? "" : ", ") + f.label;
    const std::string e = "; rng_state in " + std::to_string(with_rng) + " of " +
                          std::to_string(ranks.size()) + " model-parallel rank files (" + names +
                          ")";
    if (view->rng_cpu.found) view->rng_cpu.evidence += e;
    if (view->rng_cuda.found) view->rng_cuda.evidence += e;
  }
}

}  // namespace ckpt::verify
