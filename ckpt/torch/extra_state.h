// The /extra component: named values the training program wants back on resume that no other
// component covers (an EMA tensor, a best-loss scalar, a run tag). The program registers a
// pointer to each value once; capture reads them, restore writes them back.
//
// Layout of /extra (the on-disk schema):
//   tensors   one per registered torch::Tensor, by name
//   attrs     one per registered scalar, by name: double, int64 or string
//
// Ownership: ExtraRegistry holds non-owning pointers; the values must outlive it and every
// capture/restore that uses it. Capture borrows tensors (see tensor_convert.h) and copies scalars.
// Not thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <variant>

#include "ckpt/base/status.h"
#include "ckpt/format/tree.h"
#include "ckpt/torch/fwd.h"

namespace ckpt::torch_adapter {

class ExtraRegistry {
 public:
  using Value = std::variant<torch::Tensor*, double*, int64_t*, std::string*>;

  // Registers a value under `name`; a second add with the same name replaces the first.
  void add(const std::string& name, torch::Tensor* t) { values_[name] = t; }
  void add(const std::string& name, double* v) { values_[name] = v; }
  void add(const std::string& name, int64_t* v) { values_[name] = v; }
  void add(const std::string& name, std::string* v) { values_[name] = v; }
  const std::map<std::string, Value>& values() const { return values_; }

 private:
  std::map<std::string, Value> values_;
};

// Fills `out` (normally root.child("extra")). Fails on an undefined registered tensor.
Status capture_extra(const ExtraRegistry& extra, Node* out);

// Writes every registered value back from `in`. A registered name missing from `in`, or stored
// with another type, is an error naming it. A registered tensor that is defined is overwritten in
// place (same dtype and shape required); an undefined one is assigned a new CPU tensor. Values in
// `in` that nobody registered are left alone (the program may have stopped tracking them).
Status restore_extra(const Node& in, ExtraRegistry& extra);

}  // namespace ckpt::torch_adapter
