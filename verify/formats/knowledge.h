// What the auditor knows about optimizer and scheduler classes, as data: one row per class says
// which per-parameter state it keeps (and under which hyperparameter it keeps it), when its state
// may legitimately be empty, where its step count lives and how its hyperparameters show in
// `param_groups`; one row per scheduler says which keys identify it and at what cadence it
// steps. Detection identifies a saved optimizer's class from the pickle's GLOBALs where the file
// records one and from the state's shape (param_group keys, then state keys) otherwise; the rules
// judge it by its row. The counters' names are here too. Pure data and pure functions.
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace ckpt::verify {

// A state key an optimizer keeps for every parameter it stepped, possibly only under a
// hyperparameter: `when` is empty (always), "K" (group K is true / non-zero), "!K" (group K is
// false / zero / absent) or "K!=None" (group K is set). `key` may list alternatives as
// "a|b" (torch's Adafactor keeps row_var+col_var for matrices, variance for vectors).
struct StateKey {
  const char* key;
  const char* when;
};

enum class StepWhere {
  kState,  // state[p]["step"] (torch's optimizers)
  kGroup,  // param_groups[i]["step"] (timm's Lamb, DeepSpeed's FusedAdam in some versions)
  kNone,   // none kept (SGD, Lion, LARS)
  kOther,  // elsewhere (MADGRAD: state["k"]; LBFGS: n_iter of the first param)
  // One count per group, kept in state[p]["step"] of the group's last stepped parameter only
  // (DeepSpeed's FusedAdam 0.10+ increments the loop variable's state after the loop); the
  // other parameters keep the group's count as of their first step, and param_groups' "step" 0.
  kGroupLast,
};

enum class EmptyWhen {
  kBeforeFirstStep,  // state == {} only before the first step (or when not saved)
  kMomentumZero,     // also after any number of steps when every group's momentum is 0
};

struct OptimizerClass {
  const char* name;     // the kind named in evidence ("Adam/AdamW", "Lion")
  const char* library;  // "torch", "timm", "transformers", "bitsandbytes", "apex/DeepSpeed"
  std::vector<const char*> globals;         // "module.Class" a pickle may record
  std::vector<const char*> group_keys;      // param_group keys that identify it (all present)
  std::vector<const char*> group_absent;    // keys it never has (tell look-alikes apart)
  std::vector<StateKey> state;              // per-parameter state it keeps once stepped
  std::vector<const char*> optional_state;  // keys it may also keep (never required)
  StepWhere step = StepWhere::kState;
  EmptyWhen empty = EmptyWhen::kBeforeFirstStep;
  bool first_param_only = false;  // LBFGS keeps its whole state on the first parameter
  bool state_at_init = false;     // Adagrad fills its state in __init__ (step 0)
  const char* hyperparameters;    // how they show in param_groups, for the evidence
};

// Every class the auditor knows, torch's first. ZeroRedundancyOptimizer's consolidated
// state_dict is its wrapped class's (it is listed with the wrapped class's shape: no row).
const std::vector<OptimizerClass>& optimizer_classes();
const OptimizerClass* optimizer_class_named(const std::string& name);

// What a saved optimizer's class is, and how that is known.
struct OptimizerIdentity {
  // The candidates that fit (one when certain; several when the shape cannot tell them apart,
  // e.g. torch 1.13's Adam and AdamW save the same keys); empty when none fits.
  std::vector<const OptimizerClass*> candidates;
  std::string how;  // "class from the pickle's GLOBAL timm.optim.lion.Lion", "by shape: ..."
  bool from_global = false;
  std::string label() const;  // "Lion", "Adam/AdamW", "Adamax or bitsandbytes Adam8bit"
};

// `group_keys`: the keys of param_groups[0]; `state_keys`: every per-parameter state key seen;
// `globals`: every "module.Name" the pickle references.
OptimizerIdentity identify_optimizer(const std::set<std::string>& group_keys,
                                     const std::set<std::string>& state_keys,
                                     const std::set<std::string>& globals);

// The value of a hyperparameter in a param_group, as the conditions read it: true for a non-zero
// number or True, false for 0 / False / None / absent.
struct GroupValues {
  std::map<std::string, double> numbers;  // ints, floats, bools (0/1)
  std::set<std::string> none;             // keys whose value is None
  std::set<std::string> present;          // every key
};
bool condition_holds(const char* when, const GroupValues& g);

// The state keys `c` must keep for a parameter of a group with values `g` ("a|b" alternatives
// kept as written).
std::vector<std::string> required_state(const OptimizerClass& c, const GroupValues& g);
// True when `state` holds `key` or one of its "a|b" alternatives.
bool has_state_key(const std::string& key, const std::set<std::string>& state);

// Scheduler rows: the keys that identify the class and its cadence.
enum class Cadence {
  kPerStep,    // stepped every optimizer step (most torch schedulers as the examples use them)
  kAny,        // stepped per step or per epoch, as the user chose: both are right
  kPerMetric,  // ReduceLROnPlateau: stepped once per evaluation / epoch, with a metric
  kRecomputed  // no step count of its own: the LR is recomputed from a counter (timm)
};

struct SchedulerClass {
  const char* name;
  const char* library;
  std::vector<const char*> keys;    // all present in its state_dict
  std::vector<const char*> absent;  // never present
  Cadence cadence = Cadence::kAny;
  const char* counter_key;  // its own count: "last_epoch", "last_step", "" (recomputed)
};

const std::vector<SchedulerClass>& scheduler_classes();
// The first row whose keys are all in `keys` and none of whose `absent` are: the order of the
// table is most specific first.
const SchedulerClass* identify_scheduler(const std::set<std::string>& keys);

// Counter names, as libraries spell them: steps (global_step, step, iteration, iter_num, iter,
// num_updates, train_step, global_steps) and epochs (epoch, current_epoch).
const std::vector<const char*>& step_counter_keys();
const std::vector<const char*>& epoch_counter_keys();

// Config keys that say the LR is computed from a counter rather than kept by a scheduler object
// (nanoGPT's decay_lr / warmup_iters / lr_decay_iters, timm's sched): a research loop's get_lr().
const std::vector<const char*>& lr_recompute_config_keys();

}  // namespace ckpt::verify
