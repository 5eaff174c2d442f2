// Objects a pickle records by class — torch.save(model), torch.save(optimizer), a research
// script's torch.save({"model": model, "optimizer": optimizer, "scheduler": scheduler}) — read as
// the state_dicts their classes would give, so that detection finds them as it finds any state
// dict. The unpickler never constructs them (verify/pickle): each is an Object node, its class
// the GLOBAL the pickle names, its __dict__ the BUILD state. Three kinds are lowered:
//
//   nn.Module    __dict__ with _parameters and _modules: its parameters and persistent buffers
//                under their dotted names, as module.state_dict() gives them
//   Optimizer    __dict__ with state and param_groups: Optimizer.state_dict()'s shape, the
//                parameters numbered in param_groups order and the state keyed by those numbers
//   LRScheduler  __dict__ with optimizer and last_epoch: its __dict__ without the optimizer
//                (LRScheduler.state_dict() and ReduceLROnPlateau's)
//
// Objects are lowered only where the tree reaches them through dicts, lists and tuples from the
// root, never inside another object: torch 1.13 pickles OneCycleLR's anneal_func as
// getattr(<the scheduler object with its whole optimizer>, name), and that copy is neither a
// second scheduler nor a second optimizer. Every other object stays opaque. The class each
// lowered dict came from is kept, for the evidence and for the optimizer's identity
// (knowledge.h: "class from the pickle's GLOBAL"). Owns the Values it makes; the tree it returns
// shares every node it did not change with the original. Walks are bounded (depth cap, memo).
// Not thread-safe; one instance per tree.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "verify/pickle/value.h"

namespace ckpt::verify {

class PickledObjects {
 public:
  // The tree with every reachable module, optimizer and scheduler object lowered; `root` itself
  // when there is none. Valid while this object lives.
  const Value& lower(const Value& root);

  // The class ("torch.optim.adamw.AdamW") of the object `dict` was lowered from, or nullptr.
  const std::string* class_of(const Value* dict) const;

 private:
  const Value* walk(const Value* v, int depth);
  const Value* lower_object(const Value& obj);
  Value* module_state(const Value& obj);
  Value* optimizer_state(const Value& obj);
  Value* scheduler_state(const Value& obj);
  Value* make(Kind k);
  const Value* str(const std::string& s);

  std::vector<std::unique_ptr<Value>> arena_;
  std::map<const Value*, const Value*> memo_;  // original -> lowered (itself when unchanged)
  std::map<const Value*, std::string> classes_;
};

}  // namespace ckpt::verify
