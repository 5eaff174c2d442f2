// The allow-list of a non-executing unpickler: what a REDUCE/NEWOBJ, BUILD or persistent id
// turns into. Internal to verify/pickle (pickle_reader.cc is its only caller; tests reach it
// through read_pickle).
//
// Known data constructors (torch tensor rebuilds, OrderedDict, Counter, set/frozenset, bytes,
// _codecs.encode, io.BytesIO, numpy arrays and scalars, torch.Size, torch.device) are interpreted
// into plain Values; any other callable yields an Object node (callable, args, later BUILD state)
// and is never called. Stateless; each call works on the PickleDoc it is given.
#pragma once

#include <functional>
#include <string>

#include "ckpt/base/status.h"
#include "verify/pickle/pickle_reader.h"
#include "verify/pickle/value.h"

namespace ckpt::verify {

struct Interpreter {
  PickleDoc& doc;
  const std::string& where;
  const PickleLimits& limits;
  std::function<Result<Value*>(Kind)> make;  // counts against limits.max_values
};

// Python 2 spellings and numpy 2 module moves, mapped to one name ("__builtin__" → "builtins").
std::string normalize_module(const std::string& module);

Result<Value*> interpret_call(Interpreter& in, Value* callable, Value* args);
Status interpret_build(Interpreter& in, Value* obj, Value* state);
Result<Value*> interpret_persistent_id(Interpreter& in, Value* pid);

}  // namespace ckpt::verify
