#include "verify/formats/knowledge.h"

#include <algorithm>
#include <cstring>

namespace ckpt::verify {

namespace {
using SW = StepWhere;
using EW = EmptyWhen;
}  // namespace

// Rows checked against each library's source and, for torch 1.13 / 2.x, timm 1.0 and
// transformers, against state_dicts saved after real steps (fixtures/foreign/knowledge/).
const std::vector<OptimizerClass>& optimizer_classes() {
  static const std::vector<OptimizerClass> kRows = {
      {"SGD",
       "torch",
       {"torch.optim.sgd.SGD"},
       {"momentum", "dampening", "nesterov"},
       {"trust_coeff"},
       {{"momentum_buffer", "momentum"}},
       {},
       SW::kNone,
       EW::kMomentumZero,
       false,
       false,
       "lr, momentum, dampening, nesterov, weight_decay"},
      {"LARS",
       "timm",
       {"timm.optim.lars.Lars"},
       {"momentum", "dampening", "nesterov", "trust_coeff"},
       {},
       {{"momentum_buffer", "momentum"}},
       {},
       SW::kNone,
       EW::kMomentumZero,
       false,
       false,
       "lr, momentum, trust_coeff, trust_clip, always_adapt"},
      {"RMSprop",
       "torch",
       {"torch.optim.rmsprop.RMSprop"},
       {"alpha", "centered", "momentum"},
       {},
       {{"square_avg", ""}, {"momentum_buffer", "momentum"}, {"grad_avg", "centered"}},
       {},
       SW::kState,
       EW::kBeforeFirstStep,
       false,
       false,
       "lr, alpha, eps, momentum, centered"},
      {"ASGD",
       "torch",
       {"torch.optim.asgd.ASGD"},
       {"lambd", "t0", "alpha"},
       {},
       {{"eta", ""}, {"mu", ""}, {"ax", ""}},
       {},
       SW::kState,
       EW::kBeforeFirstStep,
       false,
       false,
       "lr, lambd, alpha, t0"},
      {"AdaBelief",
       "timm",
       {"timm.optim.adabelief.AdaBelief"},
       {"betas", "rectify", "degenerated_to_sgd"},
       {},
       {{"exp_avg", ""}, {"exp_avg_var", ""}, {"max_exp_avg_var", "amsgrad"}},
       {"rho_inf", "buffer"},
       SW::kState,
       EW::kBeforeFirstStep,
       false,
       false,
       "lr, betas, eps, rectify, decoupled_decay"},
      {"AdamP",
       "timm",
       {"timm.optim.adamp.AdamP"},
       {"betas", "delta", "wd_ratio"},
       {},
       {{"exp_avg", ""}, {"exp_avg_sq", ""}},
       {},
       SW::kState,
       EW::kBeforeFirstStep,
       false,
       false,
       "lr, betas, delta, wd_ratio, nesterov"},
      {"LAMB",
       "timm",
       {"timm.optim.lamb.Lamb"},
       {"betas", "bias_correction", "grad_averaging", "max_grad_norm"},
       {},
       {{"exp_avg", ""}, {"exp_avg_sq", ""}},
       {},
       SW::kGroup,
       EW::kBeforeFirstStep,
       false,
       false,
       "lr, betas, bias_correction, grad_averaging, max_grad_norm; step in param_groups"},
      {"FusedAdam (apex)",
       "apex",
       {"apex.optimizers.fused_adam.FusedAdam"},
       {"betas", "bias_correction"},
       {"grad_averaging", "max_grad_norm", "amsgrad"},
       {{"exp_avg", ""}, {"exp_avg_sq", ""}},
       {},
       SW::kGroup,
       EW::kBeforeFirstStep,
       false,
       false,
       "lr, betas, eps, bias_correction, weight_decay; step in param_groups"},
      {"FusedAdam (DeepSpeed)",
       "DeepSpeed",
       {"deepspeed.ops.adam.fused_adam.FusedAdam"},
       {"betas", "bias_correction"},
       {"grad_averaging", "max_grad_norm", "amsgrad"},
       {{"exp_avg", ""}, {"exp_avg_sq", ""}},
       {"step"},
       SW::kGroupLast,
       EW::kBeforeFirstStep,
       false,
       false,
       "lr, betas, eps, bias_correction, weight_decay; param_groups step 0, the group's count on "
       "its last parameter's state"},
      {"DeepSpeedCPUAdam",
       "DeepSpeed",
       {"deepspeed.ops.adam.cpu_adam.DeepSpeedCPUAdam"},
       {"betas", "bias_correction", "amsgrad"},
       {"grad_averaging", "max_grad_norm"},
       {{"exp_avg", ""}, {"exp_avg_sq", ""}},
       {},
       SW::kState,
       EW::kBeforeFirstStep,
       false,
       false,
       "lr, betas, eps, bias_correction, amsgrad, weight_decay (ZeRO-Offload's CPU Adam)"},
      {"Adam/AdamW",
       "torch",
       {"torch.optim.adam.Adam", "torch.optim.adamw.AdamW", "torch.optim.Adam",
        "torch.optim.AdamW"},
       {"betas", "amsgrad"},
       {"momentum_decay", "bias_correction", "rectify", "delta"},
       {{"exp_avg", ""}, {"exp_avg_sq", ""}, {"max_exp_avg_sq", "amsgrad"}},
       {},
       SW::kState,
       EW::kBeforeFirstStep,
       false,
       false,
       "lr, betas, eps, weight_decay, amsgrad"},
      {"NAdam",
       "torch",
       {"torch.optim.nadam.NAdam"},
       {"betas", "momentum_decay"},
       {},
       {{"exp_avg", ""}, {"exp_avg_sq", ""}, {"mu_product", ""}},
       {},
       SW::kState,
       EW::kBeforeFirstStep,
       false,
       false,
       "lr, betas, eps, momentum_decay"},
      {"RAdam",
       "torch",
       {"torch.optim.radam.RAdam"},
       {"betas", "eps"},
       {"amsgrad", "momentum_decay", "bias_correction", "delta", "rectify"},
       {{"exp_avg", ""}, {"exp_avg_sq", ""}},
       {},
       SW::kState,
       EW::kBeforeFirstStep,
       false,
       false,
       "lr, betas, eps, weight_decay, decoupled_weight_decay"},
      {"Adamax",
       "torch",
       {"torch.optim.adamax.Adamax"},
       {"betas", "eps"},
       {"amsgrad", "momentum_decay", "bias_correction", "delta", "rectify"},
       {{"exp_avg", ""}, {"exp_inf", ""}},
       {},
       SW::kState,
       EW::kBeforeFirstStep,
       false,
       false,
       "lr, betas, eps, weight_decay"},
      {"SparseAdam",
       "torch",
       {"torch.optim.sparse_adam.SparseAdam"},
       {"betas", "eps"},
       {"weight_decay", "amsgrad"},
       {{"exp_avg", ""}, {"exp_avg_sq", ""}},
       {},
       SW::kState,
       EW::kBeforeFirstStep,
       false,
       false,
       "lr, betas, eps (no weight_decay)"},
      // Two-state (Adam, AdamW, AdEMAMix and their paged/8-bit forms), told apart by the
      // AdEMAMix keys bitsandbytes 0.44+ puts in every Optimizer2State group.
      {"bitsandbytes Adam/AdamW (8-bit, two-state)",
       "bitsandbytes",
       {"bitsandbytes.optim.adam.Adam8bit", "bitsandbytes.optim.adamw.AdamW8bit",
        "bitsandbytes.optim.adam.PagedAdam8bit", "bitsandbytes.optim.adamw.PagedAdamW8bit",
        "bitsandbytes.optim.adam.Adam", "bitsandbytes.optim.adamw.AdamW",
        "bitsandbytes.optim.ademamix.AdEMAMix8bit", "bitsandbytes.optim.ademamix.AdEMAMix"},
       {"betas", "alpha", "t_alpha", "t_beta3"},
       {"amsgrad", "momentum_decay", "bias_correction", "delta", "rectify"},
       {{"state1", ""}, {"state2", ""}},
       {"qmap1", "qmap2", "absmax1", "absmax2", "max1", "max2", "new_max1", "new_max2", "gnorm_vec",
        "unorm_vec"},
       SW::kState,
       EW::kBeforeFirstStep,
       false,
       false,
       "lr, betas, eps, weight_decay, alpha, t_alpha, t_beta3; moments as state1/state2 (8-bit "
       "with qmap/absmax)"},
      {"bitsandbytes 8-bit",
       "bitsandbytes",
       {"bitsandbytes.optim.lion.Lion8bit", "bitsandbytes.optim.sgd.SGD8bit",
        "bitsandbytes.optim.lion.PagedLion8bit", "bitsandbytes.optim.lion.Lion",
        "bitsandbytes.optim.sgd.SGD"},
       {"betas"},
       {"amsgrad", "momentum_decay", "bias_correction", "delta", "rectify"},
       {{"state1", ""}},
       {"state2", "qmap1", "qmap2", "absmax1", "absmax2", "max1", "max2", "new_max1", "new_max2",
        "gnorm_vec", "unorm_vec"},
       SW::kState,
       EW::kBeforeFirstStep,
       false,
       false,
       "lr, betas, eps, weight_decay; moments as state1/state2 (8-bit with qmap/absmax)"},
      {"Lion",
       "timm",
       {"timm.optim.lion.Lion", "lion_pytorch.lion_pytorch.Lion"},
       {"betas"},
       {"eps", "amsgrad", "momentum_decay", "bias_correction", "delta", "rectify"},
       {{"exp_avg", ""}},
       {},
       SW::kNone,
       EW::kBeforeFirstStep,
       false,
       false,
       "lr, betas, weight_decay (no eps); one moment, no step count"},
      {"Adagrad",
       "torch",
       {"torch.optim.adagrad.Adagrad"},
       {"lr_decay", "initial_accumulator_value"},
       {},
       {{"sum", ""}},
       {},
       SW::kState,
       EW::kBeforeFirstStep,
       false,
       true,
       "lr, lr_decay, initial_accumulator_value, eps"},
      {"Adadelta",
       "torch",
       {"torch.optim.adadelta.Adadelta"},
       {"rho"},
       {},
       {{"square_avg", ""}, {"acc_delta", ""}},
       {},
       SW::kState,
       EW::kBeforeFirstStep,
       false,
       false,
       "lr, rho, eps"},
      {"Rprop",
       "torch",
       {"torch.optim.rprop.Rprop"},
       {"etas", "step_sizes"},
       {},
       {{"prev", ""}, {"step_size", ""}},
       {},
       SW::kState,
       EW::kBeforeFirstStep,
       false,
       false,
       "lr, etas, step_sizes"},
      {"LBFGS",
       "torch",
       {"torch.optim.lbfgs.LBFGS"},
       {"history_size", "line_search_fn"},
       {},
       {{"func_evals", ""}, {"n_iter", ""}},
       {"d", "t", "old_dirs", "old_stps", "ro", "H_diag", "prev_flat_grad", "prev_loss", "al"},
       SW::kOther,
       EW::kBeforeFirstStep,
       true,
       false,
       "lr, max_iter, history_size, line_search_fn; the whole state on the first parameter"},
      {"Adafactor",
       "torch",
       {"torch.optim._adafactor.Adafactor", "torch.optim.Adafactor"},
       {"beta2_decay", "d"},
       {},
       {{"row_var|variance", ""}},
       {"col_var"},
       SW::kState,
       EW::kBeforeFirstStep,
       false,
       false,
       "lr, beta2_decay, eps (pair), d"},
      {"Adafactor (transformers)",
       "transformers",
       {"transformers.optimization.Adafactor"},
       {"clip_threshold", "decay_rate", "relative_step", "scale_parameter"},
       {},
       {{"exp_avg_sq_row|exp_avg_sq", ""}, {"exp_avg", "beta1!=None"}},
       {"exp_avg_sq_col", "RMS"},
       SW::kState,
       EW::kBeforeFirstStep,
       false,
       false,
       "lr (None with relative_step), eps pair, clip_threshold, decay_rate, beta1"},
      {"Muon",
       "torch",
       {"torch.optim._muon.Muon", "torch.optim.Muon"},
       {"momentum", "nesterov", "ns_steps"},
       {"dampening"},
       {{"momentum_buffer", ""}},
       {},
       SW::kNone,
       EW::kBeforeFirstStep,
       false,
       false,
       "lr, momentum, nesterov, ns_coefficients, ns_steps, adjust_lr_fn (2-D parameters only)"},
      {"MADGRAD",
       "timm",
       {"timm.optim.madgrad.MADGRAD"},
       {"momentum", "decoupled_decay"},
       {"betas", "nesterov", "alpha"},
       {{"grad_sum_sq", ""}, {"s", ""}, {"x0", "momentum"}},
       {},
       SW::kState,
       EW::kBeforeFirstStep,
       false,
       false,
       "lr, eps, momentum, weight_decay, decoupled_decay"},
  };
  return kRows;
}

const OptimizerClass* optimizer_class_named(const std::string& name) {
  for (const auto& c : optimizer_classes()) {
    if (name == c.name) return &c;
  }
  return nullptr;
}

std::string OptimizerIdentity::label() const {
  if (candidates.empty()) return "optimizer";
  std::string out = candidates[0]->name;
  for (size_t i = 1; i < candidates.size(); ++i)
    out += (i + 1 == candidates.size() ? " or " : ", ") + std::string(candidates[i]->name);
  return out;
}

namespace {

std::vector<std::string> split_alternatives(const std::string& key) {
  std::vector<std::string> out;
  size_t b = 0;
  for (size_t p; (p = key.find('|', b)) != std::string::npos; b = p + 1)
    out.push_back(key.substr(b, p - b));
  out.push_back(key.substr(b));
  return out;
}

// Every state key the class may keep.
std::set<std::string> possible_state(const OptimizerClass& c) {
  std::set<std::string> out;
  for (const auto& k : c.state) {
    for (const auto& a : split_alternatives(k.key)) out.insert(a);
  }
  for (const char* k : c.optional_state) out.insert(k);
  if (c.step == StepWhere::kState) out.insert("step");
  return out;
}

bool fits_groups(const OptimizerClass& c, const std::set<std::string>& g) {
  for (const char* k : c.group_keys) {
    if (g.count(k) == 0) return false;
  }
  for (const char* k : c.group_absent) {
    if (g.count(k) != 0) return false;
  }
  return true;
}

bool fits_state(const OptimizerClass& c, const std::set<std::string>& state) {
  if (state.empty()) return true;
  const std::set<std::string> possible = possible_state(c);
  for (const auto& k : state) {
    if (possible.count(k) == 0) return false;
  }
  // Keys it always keeps may be missing here: that is what the rules then report.
  return true;
}

}  // namespace

OptimizerIdentity identify_optimizer(const std::set<std::string>& group_keys,
                                     const std::set<std::string>& state_keys,
                                     const std::set<std::string>& globals) {
  OptimizerIdentity id;
  std::vector<const OptimizerClass*> fit;
  for (const auto& c : optimizer_classes()) {
    if (fits_groups(c, group_keys) && fits_state(c, state_keys)) fit.push_back(&c);
  }
  // Most specific first: the rows that match the most identifying group keys.
  size_t best = 0;
  for (const auto* c : fit) best = std::max(best, c->group_keys.size());
  std::vector<const OptimizerClass*> top;
  for (const auto* c : fit) {
    if (c->group_keys.size() == best) top.push_back(c);
  }
  // A class the pickle names (torch.save(optimizer), a pickled scheduler's optimizer, a
  // config object) and whose shape fits is certain.
  for (const auto* c : fit) {
    for (const char* g : c->globals) {
      if (globals.count(g) != 0) {
        id.candidates = {c};
        id.from_global = true;
        id.how = std::string("class from the pickle's GLOBAL ") + g;
        return id;
      }
    }
  }
  id.candidates = top;
  if (top.size() == 1) {
    std::string keys;
    for (const char* k : top[0]->group_keys) keys += (keys.empty() ? "" : ", ") + std::string(k);
    id.how = "class by shape (param_groups keys " + keys +
             (state_keys.empty() ? "" : " and its state keys") + "; no class GLOBAL recorded)";
  } else if (top.size() > 1) {
    id.how =
        "class by shape: " + id.label() +
        " save the same keys (no class GLOBAL recorded); only what all of them keep is checked";
  } else {
    id.how = "class not identified (param_groups and state keys match no known optimizer)";
  }
  return id;
}

bool condition_holds(const char* when, const GroupValues& g) {
  if (when == nullptr || when[0] == '\0') return true;
  std::string w = when;
  if (w.size() > 6 && w.compare(w.size() - 6, 6, "!=None") == 0) {
    const std::string k = w.substr(0, w.size() - 6);
    return g.present.count(k) != 0 && g.none.count(k) == 0;
  }
  const bool negate = w[0] == '!';
  if (negate) w.erase(0, 1);
  auto it = g.numbers.find(w);
  const bool truthy = it != g.numbers.end() && it->second != 0;
  return negate ? !truthy : truthy;
}

std::vector<std::string> required_state(const OptimizerClass& c, const GroupValues& g) {
  std::vector<std::string> out;
  for (const auto& k : c.state) {
    if (condition_holds(k.when, g)) out.push_back(k.key);
  }
  return out;
}

bool has_state_key(const std::string& key, const std::set<std::string>& state) {
  for (const auto& a : split_alternatives(key)) {
    if (state.count(a) != 0) return true;
  }
  return false;
}

// Most specific first: identify_scheduler returns the first row that fits.
const std::vector<SchedulerClass>& scheduler_classes() {
  using Cd = Cadence;
  static const std::vector<SchedulerClass> kRows = {
      {"ReduceLROnPlateau",
       "torch",
       {"patience", "num_bad_epochs"},
       {},
       Cd::kPerMetric,
       "last_epoch"},
      {"SequentialLR", "torch", {"_schedulers", "_milestones"}, {}, Cd::kAny, "last_epoch"},
      {"ChainedScheduler", "torch", {"_schedulers"}, {}, Cd::kAny, "last_epoch"},
      {"mmengine ParamScheduler",
       "mmengine",
       {"last_step", "base_values", "by_epoch"},
       {},
       Cd::kAny,
       "last_step"},
      {"timm scheduler",
       "timm",
       {"base_values", "t_in_epochs", "param_group_field"},
       {"last_step", "last_epoch"},
       Cd::kRecomputed,
       ""},
      {"SWALR", "torch", {"anneal_epochs", "last_epoch"}, {}, Cd::kAny, "last_epoch"},
      {"CyclicLR", "torch", {"max_lrs"}, {}, Cd::kPerStep, "last_epoch"},
      {"CyclicLR", "torch", {"total_size"}, {}, Cd::kPerStep, "last_epoch"},
      {"OneCycleLR", "torch", {"total_steps"}, {}, Cd::kPerStep, "last_epoch"},
      {"CosineAnnealingLR", "torch", {"T_max"}, {}, Cd::kAny, "last_epoch"},
      {"CosineAnnealingWarmRestarts", "torch", {"T_0"}, {}, Cd::kAny, "last_epoch"},
      {"MultiStepLR", "torch", {"milestones"}, {}, Cd::kAny, "last_epoch"},
      {"StepLR", "torch", {"step_size"}, {}, Cd::kAny, "last_epoch"},
      {"LambdaLR", "torch", {"lr_lambdas"}, {}, Cd::kAny, "last_epoch"},
      {"LinearLR", "torch", {"start_factor"}, {}, Cd::kAny, "last_epoch"},
      {"PolynomialLR", "torch", {"power"}, {}, Cd::kAny, "last_epoch"},
      {"ConstantLR", "torch", {"factor"}, {}, Cd::kAny, "last_epoch"},
      {"ExponentialLR", "torch", {"gamma"}, {}, Cd::kAny, "last_epoch"},
  };
  return kRows;
}

const SchedulerClass* identify_scheduler(const std::set<std::string>& keys) {
  for (const auto& c : scheduler_classes()) {
    bool ok = true;
    for (const char* k : c.keys) ok = ok && keys.count(k) != 0;
    for (const char* k : c.absent) ok = ok && keys.count(k) == 0;
    if (ok) return &c;
  }
  return nullptr;
}

const std::vector<const char*>& step_counter_keys() {
  // global_steps: DeepSpeed's engine (mp_rank_00_model_states.pt); iter_num: nanoGPT; iter:
  // mmengine's meta; iteration: Megatron.
  static const std::vector<const char*> k = {"global_step", "step",       "iteration",
                                             "num_updates", "train_step", "global_steps",
                                             "iter_num",    "iter"};
  return k;
}

const std::vector<const char*>& epoch_counter_keys() {
  static const std::vector<const char*> k = {"epoch", "current_epoch"};
  return k;
}

const std::vector<const char*>& lr_recompute_config_keys() {
  static const std::vector<const char*> k = {"decay_lr", "warmup_iters", "lr_decay_iters",
                                             "sched",    "lr_schedule",  "warmup_epochs"};
  return k;
}

}  // namespace ckpt::verify
