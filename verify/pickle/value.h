// The value tree a non-executing unpickler builds: plain Python data, tensor records, and opaque
// nodes for everything it will not construct.
//
// A PickleDoc owns every Value of one pickle in an arena; Values point at each other with raw
// pointers, so memo sharing, tied tensors and even cyclic pickles (a list that contains itself)
// are representable without reference-count leaks. Anyone walking the tree must therefore use a
// visited set or a depth cap (helpers below). Nothing here ever imports or calls Python code:
// a GLOBAL outside the allow-list stays a Global node, and calling it produces an Object node
// holding (callable, args, state) for the report. Not thread-safe to build; safe to read from
// many threads once built.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ckpt/format/any_dtype.h"

namespace ckpt::verify {

enum class Kind : uint8_t {
  kNone,
  kBool,
  kInt,
  kBigInt,
  kFloat,
  kStr,
  kBytes,
  kList,
  kTuple,
  kDict,
  kSet,
  kGlobal,   // module.name, never imported
  kObject,   // callable(args) with optional BUILD state, not constructed
  kStorage,  // a persistent id: ('storage', type, key, location, numel)
  kTensor,   // a torch tensor (or numpy array) record: metadata only, no bytes
};

const char* kind_name(Kind k);

struct Value;

// Where a tensor's bytes live, without reading them.
struct TensorRecord {
  AnyDType dtype;           // ours ("float32", "uint8", ...) or other: "numpy <u4", "bits16"
  size_t element_size = 0;  // 0 when unknown
  std::vector<int64_t> shape;
  std::vector<int64_t> stride;  // elements
  int64_t storage_offset = 0;   // elements
  std::string storage_key;      // zip record data/<key>; empty for inline (numpy) or meta
  std::string location;         // "cpu", "cuda:0", "meta", "numpy"
  int64_t storage_numel = 0;    // elements of the storage (bytes for UntypedStorage)
  uint64_t storage_nbytes = 0;
  bool requires_grad = false;
  std::string rebuild;  // the torch function that rebuilt it, e.g. "_rebuild_tensor_v2"
  const Value* inline_bytes = nullptr;  // numpy arrays carry their bytes in the pickle

  int64_t numel() const;    // -1 on overflow
  uint64_t nbytes() const;  // numel * element_size (0 on overflow/unknown)
};

struct Value {
  Kind kind = Kind::kNone;
  bool b = false;
  int64_t i = 0;
  double f = 0;
  std::string s;     // str, bytes, big-int little-endian two's complement, Global module
  std::string name;  // Global name
  std::vector<const Value*> items;                             // list, tuple, set
  std::vector<std::pair<const Value*, const Value*>> entries;  // dict, in insertion order
  const Value* callable = nullptr;                             // Object: the Global called
  const Value* args = nullptr;                                 // Object: the argument tuple
  const Value* state = nullptr;                                // Object: BUILD state
  std::unique_ptr<TensorRecord> tensor;  // kTensor, kStorage (storage fields only)
  int depth = 1;                         // nesting depth when built (containers update it)

  bool is(Kind k) const { return kind == k; }
  bool is_str(const char* v) const { return kind == Kind::kStr && s == v; }
  // Dict lookup by string key; nullptr when not a dict or absent.
  const Value* get(const std::string& key) const;
  // Integer value (int, bool) or nullopt.
  std::optional<int64_t> as_int() const;
  // Number (int, bool, float) or nullopt.
  std::optional<double> as_number() const;
  // "module.name" for Global and Object(callable).
  std::string qualname() const;
};

// How the reader classed a GLOBAL: known (torch, collections, numpy, builtin containers and the
// training libraries: transformers, accelerate, Lightning, DCP metadata...), opaque (a name outside
// that allow-list: a user class or worse; reported as an error, never constructed), or dangerous
// (a callable whose only use in a pickle is running code: os/posix.system, builtins.eval,
// subprocess...).
enum class GlobalClass : uint8_t { kKnown, kOpaque, kDangerous };
const char* global_class_name(GlobalClass c);
GlobalClass classify_global(const std::string& qualname);

// One GLOBAL / STACK_GLOBAL / INST opcode of a pickle and what the stream does with the object it
// names. `called` means unpickling invokes it: REDUCE, INST, OBJ, NEWOBJ/NEWOBJ_EX with arguments,
// BUILD on it or on an object it made (`__setstate__`), or a data constructor that calls its
// argument (`copyreg._reconstructor`, `torch._tensor._rebuild_from_type_v2`, a called
// `functools.partial`). For a called `builtins.getattr` whose arguments are (an object the
// pickle built from class C, a plain attribute name), `bound_method_of` is C and `attribute` the
// name: the shape in which pickle saves a bound method. It stays empty for every other getattr
// (a module, a global, a dunder name, or a result that is itself called).
struct GlobalUse {
  std::string module;  // as the pickle spells it ("__builtin__", "numpy._core.multiarray")
  std::string name;
  uint64_t offset = 0;  // of the opcode in the pickle's input
  bool called = false;
  std::string bound_method_of;
  std::string attribute;
};

// Owner of all Values of one pickle.
class PickleDoc {
 public:
  Value* make(Kind k);
  size_t size() const { return values_.size(); }
  const Value* root = nullptr;
  // Every Global referenced by the pickle, in first-seen order, with its class.
  std::vector<std::pair<std::string, GlobalClass>> globals;
  // Every GLOBAL-like opcode, in stream order (memoized re-uses are not repeated).
  std::vector<GlobalUse> uses;
  // For predicting torch.load(weights_only=True): the first opcode its restricted unpickler does
  // not implement (0 when none) and its offset, and the numpy dtype classes a BUILD restores
  // ("UInt32DType").
  uint8_t weights_only_bad_opcode = 0;
  uint64_t weights_only_bad_offset = 0;
  std::vector<std::pair<std::string, uint64_t>> numpy_dtype_builds;  // (class, BUILD offset)
  int protocol = 0;
  uint64_t end_offset = 0;  // offset just past STOP

 private:
  std::vector<std::unique_ptr<Value>> values_;
};

// A short rendering of a scalar or container header ("int 42", "dict[3]", "tensor float32 [2,3]").
std::string summarize(const Value& v);
// A shape as messages write it: "[6, 4]", "[]" for a scalar.
std::string shape_text(const std::vector<int64_t>& shape);

}  // namespace ckpt::verify
