#include "verify/formats/detect.h"

#include <cmath>
#include <deque>
#include <map>
#include <set>
#include <sstream>
#include <unordered_set>

#include "ckpt/base/hash.h"
#include "verify/formats/composer_torchvision.h"
#include "verify/formats/knowledge.h"
#include "verify/formats/library_layouts.h"
#include "verify/formats/pickled_objects.h"

namespace ckpt::verify {
namespace {

constexpr int kMaxDepth = 64;
constexpr size_t kMaxVisits = 2'000'000;

bool is_uint8_vector(const Value* v, int64_t n) {
  return v != nullptr && v->kind == Kind::kTensor && v->tensor->dtype.is(DType::kUInt8) &&
         v->tensor->shape.size() == 1 && (n < 0 || v->tensor->shape[0] == n);
}
bool is_cuda_rng(const Value* v) {
  return is_uint8_vector(v, 16) || is_uint8_vector(v, 8) || is_uint8_vector(v, 816);
}

std::string key_text(const Value* k) {
  if (k->kind == Kind::kStr) return k->s;
  if (k->kind == Kind::kInt) return std::to_string(k->i);
  return summarize(*k);
}

std::string join(const std::string& path, const std::string& key) {
  return path.empty() ? key : path + "." + key;
}

std::string shape_str(const std::vector<int64_t>& s) {
  std::ostringstream o;
  o << "[";
  for (size_t i = 0; i < s.size(); ++i) o << (i ? "," : "") << s[i];
  o << "]";
  return o.str();
}

std::string where(const DetectContext& ctx, const std::string& path) {
  std::string p = path.empty() ? "(top level)" : path;
  return ctx.source.empty() ? p : ctx.source + ": " + p;
}

bool is_optimizer(const Value& d) {
  const Value* st = d.get("state");
  const Value* pg = d.get("param_groups");
  return st != nullptr && st->kind == Kind::kDict && pg != nullptr && pg->kind == Kind::kList;
}
bool is_scheduler(const Value& d) {
  if (d.get("last_epoch") != nullptr && d.get("base_lrs") != nullptr) return true;
  // mmengine's param schedulers (last_step, base_values) and timm's (base_values, t_in_epochs).
  if (d.get("base_values") != nullptr &&
      (d.get("last_step") != nullptr || d.get("t_in_epochs") != nullptr))
    return true;
  // DeepSpeed's schedulers (WarmupLR, WarmupDecayLR, OneCycle) save only their batch count.
  if (d.get("last_batch_iteration") != nullptr && d.entries.size() == 1) return true;
  // torch 2.x ChainedScheduler: no top-level last_epoch; its children and its _last_lr.
  if (d.get("_schedulers") != nullptr && d.get("_last_lr") != nullptr) return true;
  // SequentialLR / ChainedScheduler skip the base __init__: no base_lrs, children in _schedulers.
  if (d.get("last_epoch") != nullptr && d.get("_schedulers") != nullptr) return true;
  // ReduceLROnPlateau keeps no base_lrs: mode/patience/num_bad_epochs/last_epoch.
  return d.get("last_epoch") != nullptr && d.get("patience") != nullptr &&
         d.get("num_bad_epochs") != nullptr;
}
bool is_grad_scaler(const Value& d) {
  return d.get("scale") != nullptr && d.get("growth_factor") != nullptr &&
         d.get("backoff_factor") != nullptr && d.get("growth_interval") != nullptr;
}
bool is_python_rng(const Value* v) {
  return v != nullptr && v->kind == Kind::kTuple && v->items.size() == 3 && v->items[0]->as_int() &&
         *v->items[0]->as_int() == 3 && v->items[1]->kind == Kind::kTuple &&
         v->items[1]->items.size() == 625;
}
bool is_numpy_rng(const Value* v) {
  return v != nullptr && v->kind == Kind::kTuple && v->items.size() == 5 &&
         v->items[0]->is_str("MT19937") && v->items[1]->kind == Kind::kTensor;
}

class Detector {
 public:
  Detector(const DetectContext& ctx, const PickledObjects& objects, CheckpointView* view)
      : ctx_(ctx), objects_(objects), view_(*view) {}

  // `lowered` is `root` with its pickled module, optimizer and scheduler objects read as their
  // state_dicts (pickled_objects.h); devices and GLOBALs come from the original.
  void run(const Value& root, const Value& lowered) {
    collect_devices(root);
    std::deque<Item> queue{{&lowered, "", 0}};
    std::unordered_set<const Value*> seen;
    size_t visits = 0;
    const Value* best_model = nullptr;
    std::string best_model_path;
    size_t best_count = 0;
    while (!queue.empty() && visits++ < kMaxVisits) {
      Item it = queue.front();
      queue.pop_front();
      const Value* v = it.v;
      if (!seen.insert(v).second || it.depth > kMaxDepth) continue;
      if (v->kind == Kind::kDict) {
        if (classify_dict(*v, it.path, it.depth)) continue;
        size_t tensors = 0, others = 0;
        bool all_uint8 = true;
        for (const auto& [k, x] : v->entries) {
          if (x->kind == Kind::kTensor) {
            ++tensors;
            all_uint8 = all_uint8 && x->tensor->dtype.is(DType::kUInt8);
          } else if (x->kind != Kind::kNone) {
            ++others;
          }
        }
        if (tensors > 0 && others == 0 && !all_uint8 && tensors > best_count) {
          best_model = v;
          best_model_path = it.path;
          best_count = tensors;
        }
        if (tensors > 0 && others == 0 && !all_uint8) continue;  // a tensor dict: nothing inside
        for (const auto& [k, x] : v->entries)
          queue.push_back({x, join(it.path, key_text(k)), it.depth + 1});
      } else if (v->kind == Kind::kList || v->kind == Kind::kTuple) {
        if (is_python_rng(v)) {
          note_python_rng(it.path);
          continue;
        }
        if (is_numpy_rng(v)) {
          note_numpy_rng(it.path);
          continue;
        }
        bool all_cuda = !v->items.empty();
        for (const Value* x : v->items) all_cuda = all_cuda && is_cuda_rng(x);
        if (all_cuda && it.path.find("cuda") != std::string::npos) {
          note_cuda_rng(*v, it.path);
          continue;
        }
        for (size_t i = 0; i < v->items.size(); ++i) {
          queue.push_back({v->items[i], it.path + "[" + std::to_string(i) + "]", it.depth + 1});
        }
      } else if (v->kind == Kind::kTensor) {
        if (is_uint8_vector(v, 5056)) {
          note_cpu_rng(*v, it.path);
        } else if (is_cuda_rng(v) && it.path.find("cuda") != std::string::npos) {
          note_cuda_rng_single(*v, it.path);
        }
      }
    }
    if (best_model != nullptr && !view_.model.found) fill_model(*best_model, best_model_path);
    view_.devices_known = true;
  }

 private:
  struct Item {
    const Value* v;
    std::string path;
    int depth;
  };

  void collect_devices(const Value& root) {
    std::vector<const Value*> stack{&root};
    std::unordered_set<const Value*> seen;
    size_t visits = 0;
    while (!stack.empty() && visits++ < kMaxVisits) {
      const Value* v = stack.back();
      stack.pop_back();
      if (v == nullptr || !seen.insert(v).second) continue;
      if (v->kind == Kind::kTensor && !v->tensor->location.empty() &&
          v->tensor->location != "numpy") {
        view_.devices.insert(v->tensor->location);
      }
      if ((v->kind == Kind::kGlobal || v->kind == Kind::kObject) && globals_.size() < 4096)
        globals_.insert(v->qualname());
      for (const Value* x : v->items) stack.push_back(x);
      for (const auto& [k, x] : v->entries) stack.push_back(x);
      stack.push_back(v->args);
      stack.push_back(v->state);
    }
  }

  // Returns true when the dict is a component (then the walk does not descend into it).
  bool classify_dict(const Value& d, const std::string& path, int depth) {
    if (is_optimizer(d)) {
      ++view_.optimizer.count;
      if (!view_.optimizer.found) {
        fill_optimizer(d, path, &view_.optimizer);
      } else {
        view_.more_optimizers.emplace_back();
        fill_optimizer(d, path, &view_.more_optimizers.back());
      }
      return true;
    }
    if (is_scheduler(d)) {
      if (!view_.scheduler.found) {
        fill_scheduler(d, path, &view_.scheduler);
      } else {
        view_.more_schedulers.emplace_back();
        fill_scheduler(d, path, &view_.more_schedulers.back());
      }
      return true;
    }
    if (is_grad_scaler(d)) {
      if (!view_.grad_scaler.found) {
        view_.grad_scaler.found = true;
        view_.grad_scaler.source = ctx_.source;
        auto s = d.get("scale")->as_number();
        view_.grad_scaler.scale = s;
        std::ostringstream o;
        o << where(ctx_, path) << ": GradScaler state";
        if (s) o << " (scale " << *s << ")";
        view_.grad_scaler.evidence = o.str();
        view_.mixed_precision = true;
        if (view_.mixed_precision_evidence.empty())
          view_.mixed_precision_evidence = view_.grad_scaler.evidence;
      }
      return true;
    }
    // Counters first: a user cursor dict often carries the global step too.
    if (depth <= 2) note_counters(d, path);
    return classify_loader(d, path);
  }

  bool classify_loader(const Value& d, const std::string& path) {
    LoaderPart& l = view_.loader;
    // torchdata StatefulDataLoader (single- or multi-process).
    if (d.get("_num_yielded") != nullptr || d.get("_snapshot") != nullptr ||
        d.get("_sampler_iter_yielded") != nullptr) {
      if (!l.found) {
        l.found = true;
        l.kind = "StatefulDataLoader";
        l.source = ctx_.source;
        const Value* n = d.get("_num_yielded");
        if (n == nullptr && d.get("_snapshot") != nullptr)
          n = d.get("_snapshot")->get("_snapshot_step");
        if (n != nullptr) l.batches = n->as_int();
        l.evidence = where(ctx_, path) + ": torchdata StatefulDataLoader state" +
                     (l.batches ? " (" + std::to_string(*l.batches) + " batches yielded)" : "");
      }
      return true;
    }
    // Lightning loops: position known, data restorable only with a stateful loader.
    if (const Value* fit = d.get("fit_loop"); fit != nullptr && fit->kind == Kind::kDict) {
      const Value* bp = fit->get("epoch_loop.batch_progress");
      const Value* cur = bp != nullptr ? bp->get("current") : nullptr;
      std::optional<int64_t> done =
          cur != nullptr && cur->get("completed") ? cur->get("completed")->as_int() : std::nullopt;
      const Value* sd = fit->get("state_dict");
      const Value* combined = sd != nullptr ? sd->get("combined_loader") : nullptr;
      note_scheduler_progress(*fit, path);
      if (!l.found) {
        l.kind = "Lightning loops";
        l.source = ctx_.source;
        l.batches = done;
        std::string pos =
            done ? std::to_string(*done) + " batches into the epoch" : "position unknown";
        const Value* last = bp != nullptr ? bp->get("is_last_batch") : nullptr;
        if (last != nullptr && last->kind == Kind::kBool && last->b) {
          // Saved after the last batch of an epoch: resume starts the next epoch afresh, so
          // there is no position inside the epoch to lose.
          l.found = true;
          l.evidence = where(ctx_, path) + ".fit_loop: " + pos +
                       ", is_last_batch: saved at an epoch boundary (nothing to replay)";
        } else if (combined != nullptr && combined->kind == Kind::kList &&
                   !combined->items.empty()) {
          l.found = true;
          l.evidence = where(ctx_, path) + ".fit_loop: " + pos + "; combined_loader holds " +
                       std::to_string(combined->items.size()) + " stateful loader state(s)";
        } else {
          l.evidence = where(ctx_, path) + ".fit_loop: " + pos +
                       ", but no combined_loader state (the train loader is not stateful)";
        }
      }
      return true;
    }
    // A user cursor: integer epoch plus batch_idx and/or samples_seen.
    const Value* ep = d.get("epoch");
    const Value* bi = d.get("batch_idx");
    const Value* ss = d.get("samples_seen");
    if (ep != nullptr && ep->kind == Kind::kInt &&
        ((bi != nullptr && bi->as_int()) || (ss != nullptr && ss->as_int()))) {
      if (!l.found) {
        l.found = true;
        l.kind = "cursor";
        l.source = ctx_.source;
        l.epoch = ep->i;
        if (bi != nullptr) l.batches = bi->as_int();
        if (ss != nullptr) l.samples = ss->as_int();
        std::ostringstream o;
        o << where(ctx_, path) << ": cursor {epoch " << ep->i;
        if (l.batches) o << ", batch_idx " << *l.batches;
        if (l.samples) o << ", samples_seen " << *l.samples;
        o << "}";
        l.evidence = o.str();
      }
      return true;
    }
    return false;
  }

  // Lightning counts every scheduler.step() it makes (automatic optimisation), across resumes.
  void note_scheduler_progress(const Value& fit, const std::string& path) {
    const Value* sp = fit.get("epoch_loop.scheduler_progress");
    const Value* total = sp != nullptr ? sp->get("total") : nullptr;
    const Value* done = total != nullptr ? total->get("completed") : nullptr;
    CountersPart& c = view_.counters;
    if (done == nullptr || !done->as_int() || c.scheduler_steps) return;
    c.scheduler_steps = done->as_int();
    c.scheduler_steps_source =
        where(ctx_, join(path, "fit_loop")) + "[\"epoch_loop.scheduler_progress\"].total.completed";
  }

  void note_counters(const Value& d, const std::string& path) {
    // global_steps: DeepSpeed's engine (mp_rank_00_model_states.pt).
    CountersPart& c = view_.counters;
    bool added = false;
    for (const char* k : step_counter_keys()) {
      const Value* v = d.get(k);
      if (v == nullptr || c.global_step) continue;
      std::optional<int64_t> step;
      std::string how;
      if (v->kind == Kind::kInt) {
        step = v->i;
      } else if (v->kind == Kind::kTensor && v->tensor->numel() == 1 && ctx_.resolve) {
        // torchtitan's train_state.step, DeepSpeed-style counters: a 0-d tensor.
        if (auto x = ctx_.resolve(*v->tensor)) step = static_cast<int64_t>(std::llround(*x));
        how = " (0-d " + v->tensor->dtype.name() + " tensor)";
      }
      if (step) {
        c.global_step = step;
        c.step_key = join(path, k);
        c.evidence += (c.evidence.empty() ? "" : "; ") + where(ctx_, join(path, k)) + " = " +
                      std::to_string(*step) + how;
        added = true;
      }
    }
    for (const char* k : epoch_counter_keys()) {
      const Value* v = d.get(k);
      if (v != nullptr && (v->kind == Kind::kInt || v->kind == Kind::kFloat) && !c.epoch) {
        c.epoch = v->as_number();
        c.evidence +=
            (c.evidence.empty() ? "" : "; ") + where(ctx_, join(path, k)) + " = " + summarize(*v);
        added = true;
      }
    }
    if (added) {
      c.found = true;
      if (c.source.empty()) c.source = ctx_.source;
    }
  }

  void note_cpu_rng(const Value& t, const std::string& path) {
    RngCpuPart& r = view_.rng_cpu;
    if (r.found) return;
    r.found = true;
    r.nbytes = t.tensor->shape[0];
    r.source = ctx_.source;
    r.evidence = where(ctx_, path) + ": 5056-byte uint8 CPU generator state" + r.evidence;
  }
  void note_python_rng(const std::string& path) {
    view_.rng_cpu.python = true;
    extra_rng_note(" (+ Python random state at " + path + ")");
  }
  void note_numpy_rng(const std::string& path) {
    view_.rng_cpu.numpy = true;
    extra_rng_note(" (+ numpy MT19937 state at " + path + ")");
  }
  // Once per checkpoint: every rank file of a multi-process save holds the same kinds.
  void extra_rng_note(const std::string& s) {
    if (view_.rng_cpu.evidence.find(s) == std::string::npos) view_.rng_cpu.evidence += s;
  }
  void note_cuda_rng(const Value& list, const std::string& path) {
    RngCudaPart& r = view_.rng_cuda;
    if (r.found) return;
    r.found = true;
    r.source = ctx_.source;
    for (const Value* x : list.items) r.nbytes.push_back(x->tensor->shape[0]);
    r.evidence =
        where(ctx_, path) + ": " + std::to_string(list.items.size()) + " CUDA generator state(s)";
  }
  void note_cuda_rng_single(const Value& t, const std::string& path) {
    RngCudaPart& r = view_.rng_cuda;
    if (r.found) return;
    r.found = true;
    r.source = ctx_.source;
    r.nbytes.push_back(t.tensor->shape[0]);
    r.evidence = where(ctx_, path) + ": " + std::to_string(t.tensor->shape[0]) +
                 "-byte CUDA generator state";
  }

  void fill_model(const Value& d, const std::string& path) {
    ModelPart& m = view_.model;
    m.found = true;
    m.source = ctx_.source;
    std::ostringstream o;
    o << where(ctx_, path) << ": " << d.entries.size() << " tensors";
    if (const std::string* cls = objects_.class_of(&d))
      o << " (a pickled " << *cls << " object, read as its state_dict())";
    size_t shown = 0;
    for (const auto& [k, x] : d.entries) {
      if (x->kind != Kind::kTensor) continue;
      m.tensors.push_back(tensor_info(*x->tensor, key_text(k), ctx_.source));
      if (ctx_.values) m.tensors.back().values = ctx_.values(*x->tensor);
      if (shown++ < 4)
        o << (shown == 1 ? " (" : ", ") << key_text(k) << " " << shape_str(x->tensor->shape);
    }
    if (shown > 0) o << (shown > 4 ? ", ...)" : ")");
    m.evidence = o.str();
  }

  // Parameter ids: ints (torch.save), or FQN strings (DCP's get_optimizer_state_dict), numbered
  // in the order first seen so that groups and state refer to the same ids.
  static std::optional<int64_t> param_id(const Value* p, std::map<std::string, int64_t>* fqns) {
    if (auto id = p->as_int()) return id;
    if (p->kind != Kind::kStr) return std::nullopt;
    auto it = fqns->find(p->s);
    if (it != fqns->end()) return it->second;
    const int64_t id = static_cast<int64_t>(fqns->size());
    (*fqns)[p->s] = id;
    return id;
  }

  // A parameter's state entries. bitsandbytes (0.45+) nests the quantized state under
  // "__bnb_optimizer_quant_state__" in state_dict() (state1/state2, qmap1/qmap2,
  // absmax1/absmax2) next to "step": read as if they were at the top, as load_state_dict()
  // puts them back.
  static std::vector<std::pair<const Value*, const Value*>> param_state_entries(const Value& s) {
    std::vector<std::pair<const Value*, const Value*>> out;
    for (const auto& [k, v] : s.entries) {
      if (k->is_str("__bnb_optimizer_quant_state__") && v->kind == Kind::kDict) {
        out.insert(out.end(), v->entries.begin(), v->entries.end());
      } else {
        out.emplace_back(k, v);
      }
    }
    return out;
  }

  void fill_optimizer(const Value& d, const std::string& path, OptimizerPart* out) {
    OptimizerPart& o = *out;
    o.found = true;
    o.source = ctx_.source;
    o.name = path;
    std::map<std::string, int64_t> fqns;
    for (const Value* g : d.get("param_groups")->items) {
      OptimizerPart::Group group;
      if (g->kind != Kind::kDict) continue;
      if (const Value* ps = g->get("params"); ps != nullptr) {
        for (const Value* p : ps->items) {
          if (auto id = param_id(p, &fqns)) group.params.push_back(*id);
        }
      }
      if (const Value* lr = g->get("lr")) group.lr = lr->as_number();
      if (const Value* mo = g->get("momentum")) group.momentum = mo->as_number();
      for (const auto& [gk, gv] : g->entries) {
        const std::string name = key_text(gk);
        if (name == "params") continue;
        group.values.present.insert(name);
        if (gv->kind == Kind::kNone) group.values.none.insert(name);
        if (gv->kind == Kind::kBool) group.values.numbers[name] = gv->b ? 1 : 0;
        if (auto n = gv->as_number(); n && gv->kind != Kind::kBool) group.values.numbers[name] = *n;
      }
      if (const Value* st = g->get("step")) {
        group.step = st->as_number();
        if (!group.step && st->kind == Kind::kTensor && ctx_.resolve)
          group.step = ctx_.resolve(*st->tensor);
      }
      o.groups.push_back(std::move(group));
    }
    std::set<std::string> keys;
    for (const auto& [k, s] : d.get("state")->entries) {
      if (s->kind != Kind::kDict) {
        // Not a parameter's state (MADGRAD keeps its step as state["k"]).
        o.extra_state.push_back(key_text(k));
        continue;
      }
      OptimizerPart::ParamState ps;
      if (auto id = param_id(k, &fqns)) ps.id = *id;
      if (s->kind == Kind::kDict) {
        for (const auto& [sk, sv] : param_state_entries(*s)) {
          std::string name = key_text(sk);
          keys.insert(name);
          if (sv->kind != Kind::kNone) ps.keys.insert(name);
          if (name == "step") {
            if (auto n = sv->as_number()) {
              ps.step = n;
            } else if (sv->kind == Kind::kTensor && ctx_.resolve) {
              ps.step = ctx_.resolve(*sv->tensor);
              ps.step_unreadable = !ps.step;
            }
            continue;
          }
          if (sv->kind == Kind::kTensor) {
            ps.tensors[name] =
                tensor_info(*sv->tensor, "state." + key_text(k) + "." + name, ctx_.source);
          }
        }
      }
      o.state.push_back(std::move(ps));
    }
    // A pickled optimizer object names its own class; a state_dict leaves only the file's
    // GLOBALs (a pickled scheduler's optimizer, a config object) to go by.
    const std::string* cls = objects_.class_of(&d);
    o.identity =
        identify_optimizer(o.groups.empty() ? std::set<std::string>() : o.groups[0].values.present,
                           keys, cls != nullptr ? std::set<std::string>{*cls} : globals_);
    o.kind = o.identity.label();
    size_t nparams = 0;
    for (const auto& g : o.groups) nparams += g.params.size();
    std::ostringstream e;
    e << where(ctx_, path) << ": " << o.kind << " state for " << o.state.size();
    if (nparams > 0) {
      e << " of " << nparams << " params, ";
    } else {
      e << " params (param_groups list no params), ";
    }
    e << o.groups.size() << " param group(s); " << o.identity.how;
    if (cls != nullptr) {
      e << "; a pickled " << *cls << " object, read as its state_dict()";
      if (!o.identity.from_global) e << " (a class the knowledge table does not list)";
    }
    o.evidence = e.str();
  }

  void fill_scheduler(const Value& d, const std::string& path, SchedulerPart* out) {
    SchedulerPart& s = *out;
    s.found = true;
    s.source = ctx_.source;
    s.name = path;
    if (const Value* le = d.get("last_epoch")) s.last_epoch = le->as_int();
    const Value* lbi = d.get("last_batch_iteration");
    if (lbi != nullptr && lbi->as_int()) s.last_epoch = *lbi->as_int() + 1;  // starts at -1
    const Value* children = d.get("_schedulers");
    if (!s.last_epoch && children != nullptr && !children->items.empty() &&
        children->items[0]->kind == Kind::kDict) {
      // ChainedScheduler (torch 2.x): every child steps together; the first child's count.
      if (const Value* le = children->items[0]->get("last_epoch")) s.last_epoch = le->as_int();
    }
    if (const Value* v = d.get("_step_count")) s.step_count = v->as_int();
    auto numbers = [](const Value* l, std::vector<double>* out) {
      if (l == nullptr) return;
      for (const Value* x : l->items) {
        if (auto n = x->as_number()) out->push_back(*n);
      }
    };
    numbers(d.get("base_lrs"), &s.base_lrs);
    numbers(d.get("_last_lr"), &s.last_lr);
    std::set<std::string> keys;
    for (const auto& [k, x] : d.entries) keys.insert(key_text(k));
    s.klass = identify_scheduler(keys);
    if (lbi != nullptr) {
      s.kind = "DeepSpeed scheduler";  // the kind: its count is a counter, not what it is
      s.klass = nullptr;
    } else if (s.klass == nullptr) {
      s.kind = "LRScheduler";
    } else {
      s.kind = s.klass->name;
      if (s.klass->cadence == Cadence::kPerMetric) s.per_epoch = true;
    }
    if (d.get("_schedulers") != nullptr && children != nullptr) s.kind += child_kinds(*children);
    if (s.klass != nullptr && std::string(s.klass->library) == "mmengine") {
      // mmengine: last_step counts this scheduler's own steps inside [begin, end);
      // _global_step every step() call, at its cadence (by_epoch: epochs, else iterations).
      keys.erase("last_step");
      keys.erase("base_values");
      keys.erase("by_epoch");
      if (const SchedulerClass* like = identify_scheduler(keys))
        s.kind += std::string(" (") + like->name + "-like)";
      const Value* gstep = d.get("_global_step");
      const Value* ls = d.get("last_step");
      if (gstep != nullptr && gstep->as_int()) {
        s.last_epoch = gstep->as_int();
      } else if (ls != nullptr) {
        s.last_epoch = ls->as_int();
      }
      const Value* be = d.get("by_epoch");
      s.per_epoch = be != nullptr && be->kind == Kind::kBool && be->b;
      numbers(d.get("_last_value"), &s.last_lr);
      numbers(d.get("base_values"), &s.base_lrs);
    }
    if (s.klass != nullptr && s.klass->cadence == Cadence::kRecomputed) {
      numbers(d.get("base_values"), &s.base_lrs);
    }
    std::ostringstream e;
    e << where(ctx_, path) << ": " << s.kind;
    if (lbi != nullptr) e << " (last_batch_iteration " << summarize(*lbi) << ")";
    if (const std::string* cls = objects_.class_of(&d))
      e << " (a pickled " << *cls << " object, read as its state_dict())";
    if (s.last_epoch)
      e << (s.klass != nullptr && std::string(s.klass->library) == "mmengine" ? " _global_step "
                                                                              : " last_epoch ")
        << *s.last_epoch;
    if (s.klass != nullptr && std::string(s.klass->library) == "mmengine")
      e << (s.per_epoch ? " (by_epoch: counts epochs)" : " (counts iterations)");
    if (s.klass != nullptr && s.klass->cadence == Cadence::kRecomputed)
      e << " (keeps no step count: the loop passes the epoch / update count to step())";
    if (!d.get("last_epoch") && children != nullptr && s.last_epoch) e << " (from its first child)";
    if (!s.last_lr.empty()) e << ", _last_lr[0] " << s.last_lr[0];
    s.evidence = e.str();
  }

  // " [LinearLR, ExponentialLR]": the children of a ChainedScheduler / SequentialLR.
  std::string child_kinds(const Value& children) {
    std::string out;
    for (const Value* c : children.items) {
      if (c->kind != Kind::kDict || !is_scheduler(*c)) continue;
      SchedulerPart tmp;
      fill_scheduler(*c, "", &tmp);
      out += (out.empty() ? " [" : ", ") + tmp.kind;
    }
    return out.empty() ? out : out + "]";
  }

  const DetectContext& ctx_;
  const PickledObjects& objects_;
  CheckpointView& view_;
  std::set<std::string> globals_;  // every "module.Name" the tree references
};

}  // namespace

bool is_optimizer_state(const Value& dict) { return is_optimizer(dict); }
bool is_scheduler_state(const Value& dict) { return is_scheduler(dict); }
bool is_grad_scaler_state(const Value& dict) { return is_grad_scaler(dict); }
bool is_cpu_rng_state(const Value* v) { return is_uint8_vector(v, 5056); }
bool is_cuda_rng_state(const Value* v) { return is_cuda_rng(v); }
bool is_python_rng_state(const Value* v) { return is_python_rng(v); }
bool is_numpy_rng_state(const Value* v) { return is_numpy_rng(v); }

TensorInfo tensor_info(const TensorRecord& t, const std::string& name, const std::string& file) {
  TensorInfo i;
  i.name = name;
  i.dtype = t.dtype;
  i.shape = t.shape;
  i.device = t.location;
  i.file = file;
  i.record = t.storage_key;
  i.nbytes = t.nbytes();
  return i;
}

namespace {
void canonical(const Value& v, int depth, std::string* out) {
  if (depth > 32 || out->size() > (1u << 20)) return;
  *out += kind_name(v.kind);
  *out += '(';
  switch (v.kind) {
    case Kind::kInt:
      *out += std::to_string(v.i);
      break;
    case Kind::kFloat: {
      char b[40];
      std::snprintf(b, sizeof b, "%.17g", v.f);
      *out += b;
      break;
    }
    case Kind::kBool:
      *out += v.b ? "1" : "0";
      break;
    case Kind::kTensor:
      *out += v.tensor->dtype.name() + shape_str(v.tensor->shape);
      break;
    default:
      *out += v.s;
      if (v.kind == Kind::kGlobal || v.kind == Kind::kObject) *out += v.qualname();
  }
  for (const Value* x : v.items) canonical(*x, depth + 1, out);
  for (const auto& [k, x] : v.entries) {
    canonical(*k, depth + 1, out);
    *out += ':';
    canonical(*x, depth + 1, out);
  }
  if (v.args != nullptr) canonical(*v.args, depth + 1, out);
  if (v.state != nullptr) canonical(*v.state, depth + 1, out);
  *out += ')';
}
}  // namespace

std::string value_digest(const Value& v) {
  std::string text;
  canonical(v, 0, &text);
  return hex64(xxh3_64(text.data(), text.size()));
}

void detect_components(const Value& root, const DetectContext& ctx, CheckpointView* view) {
  PickledObjects objects;
  const Value& lowered = objects.lower(root);
  Detector(ctx, objects, view).run(root, lowered);
  note_library_layouts(lowered, ctx.source, view);
  note_composer_torchvision(root, ctx, view);
}

namespace {
constexpr int kMaxInspectDepth = 48;

InspectNode inspect_at(const Value& v, const std::string& name, size_t* budget, int depth) {
  InspectNode n;
  n.name = name;
  n.kind = kind_name(v.kind);
  n.summary = summarize(v);
  if (*budget == 0 || depth > kMaxInspectDepth) return n;
  --*budget;
  if (v.kind == Kind::kTensor) {
    n.dtype = v.tensor->dtype.name();
    n.shape = v.tensor->shape;
    n.nbytes = v.tensor->nbytes();
    n.device = v.tensor->location;
    return n;
  }
  // Python RNG words and other long scalar runs: a summary line, not 625 children.
  auto scalar = [](const Value* x) {
    return x->kind == Kind::kInt || x->kind == Kind::kFloat || x->kind == Kind::kBool ||
           x->kind == Kind::kNone || x->kind == Kind::kBigInt;
  };
  if (v.kind == Kind::kList || v.kind == Kind::kTuple || v.kind == Kind::kSet) {
    bool all_scalar = true;
    for (const Value* x : v.items) all_scalar = all_scalar && scalar(x);
    if (all_scalar && v.items.size() > 8) return n;
    for (size_t i = 0; i < v.items.size() && *budget > 0; ++i) {
      n.children.push_back(inspect_at(*v.items[i], std::to_string(i), budget, depth + 1));
    }
  } else if (v.kind == Kind::kDict) {
    for (const auto& [k, x] : v.entries) {
      if (*budget == 0) break;
      n.children.push_back(inspect_at(*x, key_text(k), budget, depth + 1));
    }
  } else if (v.kind == Kind::kObject) {
    if (v.args != nullptr && !v.args->items.empty())
      n.children.push_back(inspect_at(*v.args, "args", budget, depth + 1));
    if (v.state != nullptr && *budget > 0)
      n.children.push_back(inspect_at(*v.state, "state", budget, depth + 1));
  }
  return n;
}

}  // namespace

InspectNode inspect_value(const Value& v, const std::string& name, size_t* budget) {
  return inspect_at(v, name, budget, 0);
}

}  // namespace ckpt::verify
