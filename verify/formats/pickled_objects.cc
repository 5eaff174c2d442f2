// Pickled module, optimizer and scheduler objects read as their state_dicts (pickled_objects.h).
#include "verify/formats/pickled_objects.h"

#include <set>

namespace ckpt::verify {
namespace {

constexpr int kMaxDepth = 64;

const Value* state_dict_of(const Value& obj) {
  return obj.state != nullptr && obj.state->kind == Kind::kDict ? obj.state : nullptr;
}

bool is_module(const Value& obj) {
  const Value* st = state_dict_of(obj);
  return st != nullptr && st->get("_parameters") != nullptr && st->get("_modules") != nullptr;
}

std::string key_of(const Value* k) {
  if (k->kind == Kind::kStr) return k->s;
  if (k->kind == Kind::kInt) return std::to_string(k->i);
  return summarize(*k);
}

}  // namespace

Value* PickledObjects::make(Kind k) {
  arena_.push_back(std::make_unique<Value>());
  arena_.back()->kind = k;
  return arena_.back().get();
}

const Value* PickledObjects::str(const std::string& s) {
  Value* v = make(Kind::kStr);
  v->s = s;
  return v;
}

const Value& PickledObjects::lower(const Value& root) { return *walk(&root, 0); }

const std::string* PickledObjects::class_of(const Value* dict) const {
  auto it = classes_.find(dict);
  return it == classes_.end() ? nullptr : &it->second;
}

const Value* PickledObjects::walk(const Value* v, int depth) {
  if (v == nullptr || depth > kMaxDepth) return v;
  auto it = memo_.find(v);
  if (it != memo_.end()) return it->second;
  memo_[v] = v;  // a cycle back to `v` sees it unchanged
  const Value* out = v;
  if (v->kind == Kind::kDict) {
    std::vector<std::pair<const Value*, const Value*>> entries;
    bool changed = false;
    for (const auto& [k, x] : v->entries) {
      const Value* y = walk(x, depth + 1);
      changed = changed || y != x;
      entries.emplace_back(k, y);
    }
    if (changed) {
      Value* d = make(Kind::kDict);
      d->entries = std::move(entries);
      d->depth = v->depth;
      out = d;
    }
  } else if (v->kind == Kind::kList || v->kind == Kind::kTuple) {
    std::vector<const Value*> items;
    bool changed = false;
    for (const Value* x : v->items) {
      const Value* y = walk(x, depth + 1);
      changed = changed || y != x;
      items.push_back(y);
    }
    if (changed) {
      Value* l = make(v->kind);
      l->items = std::move(items);
      l->depth = v->depth;
      out = l;
    }
  } else if (v->kind == Kind::kObject) {
    if (const Value* d = lower_object(*v)) out = d;
  }
  memo_[v] = out;
  return out;
}

const Value* PickledObjects::lower_object(const Value& obj) {
  const Value* st = state_dict_of(obj);
  if (st == nullptr) return nullptr;
  Value* d = nullptr;
  const Value* groups = st->get("param_groups");
  const Value* state = st->get("state");
  if (is_module(obj)) {
    d = module_state(obj);
  } else if (groups != nullptr && groups->kind == Kind::kList && state != nullptr &&
             state->kind == Kind::kDict) {
    d = optimizer_state(obj);
  } else if (st->get("optimizer") != nullptr && st->get("last_epoch") != nullptr) {
    d = scheduler_state(obj);
  }
  if (d == nullptr) return nullptr;
  classes_[d] = obj.qualname();
  return d;
}

// module.state_dict(): parameters, then persistent buffers, then each child under "name.".
Value* PickledObjects::module_state(const Value& obj) {
  Value* out = make(Kind::kDict);
  struct Frame {
    const Value* module;
    std::string prefix;
    int depth;
  };
  std::vector<Frame> stack{{&obj, "", 0}};
  std::set<const Value*> seen;
  while (!stack.empty()) {
    Frame f = stack.back();
    stack.pop_back();
    if (f.depth > kMaxDepth || !seen.insert(f.module).second) continue;
    const Value* st = state_dict_of(*f.module);
    if (st == nullptr) continue;
    if (const Value* ps = st->get("_parameters"); ps != nullptr && ps->kind == Kind::kDict) {
      for (const auto& [k, x] : ps->entries) {
        if (x->kind == Kind::kTensor) out->entries.emplace_back(str(f.prefix + key_of(k)), x);
      }
    }
    std::set<std::string> transient;
    if (const Value* np = st->get("_non_persistent_buffers_set"); np != nullptr) {
      for (const Value* x : np->items) transient.insert(key_of(x));
    }
    if (const Value* bs = st->get("_buffers"); bs != nullptr && bs->kind == Kind::kDict) {
      for (const auto& [k, x] : bs->entries) {
        if (x->kind == Kind::kTensor && transient.count(key_of(k)) == 0)
          out->entries.emplace_back(str(f.prefix + key_of(k)), x);
      }
    }
    if (const Value* ms = st->get("_modules"); ms != nullptr && ms->kind == Kind::kDict) {
      // Children are pushed in reverse so that they are visited in their order.
      for (auto it = ms->entries.rbegin(); it != ms->entries.rend(); ++it) {
        if (it->second->kind == Kind::kObject && is_module(*it->second))
          stack.push_back({it->second, f.prefix + key_of(it->first) + ".", f.depth + 1});
      }
    }
  }
  return out;
}

// Optimizer.state_dict(): param_groups with the parameters numbered in order of appearance, and
// the state keyed by those numbers (a pickled optimizer keys its state by the Parameters).
Value* PickledObjects::optimizer_state(const Value& obj) {
  const Value* st = state_dict_of(obj);
  std::map<const Value*, int64_t> index;
  Value* groups = make(Kind::kList);
  for (const Value* g : st->get("param_groups")->items) {
    if (g->kind != Kind::kDict) continue;
    Value* ng = make(Kind::kDict);
    for (const auto& [k, x] : g->entries) {
      if (!k->is_str("params")) {
        ng->entries.emplace_back(k, x);
        continue;
      }
      Value* ids = make(Kind::kList);
      for (const Value* p : x->items) {
        auto [pos, added] = index.emplace(p, static_cast<int64_t>(index.size()));
        Value* id = make(Kind::kInt);
        id->i = pos->second;
        ids->items.push_back(id);
      }
      ng->entries.emplace_back(k, ids);
    }
    groups->items.push_back(ng);
  }
  Value* state = make(Kind::kDict);
  for (const auto& [k, x] : st->get("state")->entries) {
    auto pos = index.find(k);
    if (pos == index.end()) continue;  // state of a parameter no group lists: not saved by torch
    Value* id = make(Kind::kInt);
    id->i = pos->second;
    state->entries.emplace_back(id, x);
  }
  Value* out = make(Kind::kDict);
  out->entries.emplace_back(str("state"), state);
  out->entries.emplace_back(str("param_groups"), groups);
  return out;
}

// LRScheduler.state_dict(): {k: v for k, v in __dict__.items() if k != "optimizer"}.
Value* PickledObjects::scheduler_state(const Value& obj) {
  Value* out = make(Kind::kDict);
  for (const auto& [k, x] : state_dict_of(obj)->entries) {
    if (!k->is_str("optimizer")) out->entries.emplace_back(k, x);
  }
  return out;
}

}  // namespace ckpt::verify
