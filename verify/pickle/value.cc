#include "verify/pickle/value.h"

#include <set>
#include <sstream>

namespace ckpt::verify {

const char* kind_name(Kind k) {
  switch (k) {
    case Kind::kNone:
      return "None";
    case Kind::kBool:
      return "bool";
    case Kind::kInt:
      return "int";
    case Kind::kBigInt:
      return "int";
    case Kind::kFloat:
      return "float";
    case Kind::kStr:
      return "str";
    case Kind::kBytes:
      return "bytes";
    case Kind::kList:
      return "list";
    case Kind::kTuple:
      return "tuple";
    case Kind::kDict:
      return "dict";
    case Kind::kSet:
      return "set";
    case Kind::kGlobal:
      return "global";
    case Kind::kObject:
      return "object";
    case Kind::kStorage:
      return "storage";
    case Kind::kTensor:
      return "tensor";
  }
  return "?";
}

const char* global_class_name(GlobalClass c) {
  switch (c) {
    case GlobalClass::kKnown:
      return "known";
    case GlobalClass::kOpaque:
      return "opaque";
    case GlobalClass::kDangerous:
      return "dangerous";
  }
  return "?";
}

GlobalClass classify_global(const std::string& q) {
  // Modules whose callables exist to touch the OS, the interpreter or the network: a checkpoint
  // has no reason to name them, and naming them in a pickle means "run this on load".
  static const std::set<std::string> kDangerousModules = {"os",
                                                          "posix",
                                                          "nt",
                                                          "subprocess",
                                                          "sys",
                                                          "importlib",
                                                          "runpy",
                                                          "pty",
                                                          "shutil",
                                                          "socket",
                                                          "webbrowser",
                                                          "pickle",
                                                          "_pickle",
                                                          "marshal",
                                                          "ctypes",
                                                          "code",
                                                          "codeop",
                                                          "commands",
                                                          "platform",
                                                          "asyncio",
                                                          "multiprocessing",
                                                          "pdb",
                                                          "timeit",
                                                          "types",
                                                          "http",
                                                          "urllib",
                                                          "requests",
                                                          "tempfile",
                                                          "signal",
                                                          "threading",
                                                          "_posixsubprocess",
                                                          "io",
                                                          "_io"};
  static const std::set<std::string> kDangerousBuiltins = {
      "eval",    "exec",    "compile", "__import__", "open", "input", "breakpoint", "setattr",
      "delattr", "globals", "locals",  "vars",       "exit", "quit",  "memoryview"};
  // Training libraries whose classes legitimately appear in checkpoints (TrainingArguments,
  // Lightning hparams, DCP metadata); objects of theirs are inventoried, never constructed.
  static const std::set<std::string> kKnownRoots = {"torch",
                                                    "collections",
                                                    "numpy",
                                                    "transformers",
                                                    "accelerate",
                                                    "lightning",
                                                    "pytorch_lightning",
                                                    "lightning_fabric",
                                                    "pathlib",
                                                    "torchdata",
                                                    "omegaconf",
                                                    "datetime"};
  // io.BytesIO only holds bytes (DCP and torchtitan save such values); the rest of io is not.
  static const std::set<std::string> kKnown = {"_codecs.encode",    "copyreg._reconstructor",
                                               "functools.partial", "enum.Enum",
                                               "_io.BytesIO",       "io.BytesIO"};
  static const std::set<std::string> kBuiltinContainers = {
      "set", "frozenset", "bytes", "bytearray", "complex", "slice", "range", "object",
      "int", "float",     "str",   "list",      "dict",    "tuple", "bool",  "getattr"};
  size_t dot = q.rfind('.');
  std::string module = dot == std::string::npos ? q : q.substr(0, dot);
  std::string root = module.substr(0, module.find('.'));
  std::string name = dot == std::string::npos ? q : q.substr(dot + 1);
  if (kKnown.count(q) != 0) return GlobalClass::kKnown;
  if (kDangerousModules.count(root) != 0) return GlobalClass::kDangerous;
  if (module == "builtins") {
    if (kBuiltinContainers.count(name) != 0) return GlobalClass::kKnown;
    return kDangerousBuiltins.count(name) != 0 ? GlobalClass::kDangerous : GlobalClass::kOpaque;
  }
  if (kKnownRoots.count(root) != 0) return GlobalClass::kKnown;
  return GlobalClass::kOpaque;
}

int64_t TensorRecord::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0) return -1;
    if (d != 0 && n > INT64_MAX / d) return -1;
    n *= d;
  }
  return n;
}

uint64_t TensorRecord::nbytes() const {
  int64_t n = numel();
  if (n < 0 || element_size == 0) return 0;
  if (static_cast<uint64_t>(n) > UINT64_MAX / element_size) return 0;
  return static_cast<uint64_t>(n) * element_size;
}

const Value* Value::get(const std::string& key) const {
  if (kind != Kind::kDict) return nullptr;
  for (const auto& [k, v] : entries) {
    if (k->kind == Kind::kStr && k->s == key) return v;
  }
  return nullptr;
}

std::optional<int64_t> Value::as_int() const {
  if (kind == Kind::kInt) return i;
  if (kind == Kind::kBool) return b ? 1 : 0;
  return std::nullopt;
}

std::optional<double> Value::as_number() const {
  if (kind == Kind::kFloat) return f;
  if (auto v = as_int()) return static_cast<double>(*v);
  return std::nullopt;
}

std::string Value::qualname() const {
  if (kind == Kind::kGlobal) return s + "." + name;
  if (kind == Kind::kObject && callable != nullptr) return callable->qualname();
  return "";
}

Value* PickleDoc::make(Kind k) {
  values_.push_back(std::make_unique<Value>());
  values_.back()->kind = k;
  if (k == Kind::kTensor || k == Kind::kStorage) {
    values_.back()->tensor = std::make_unique<TensorRecord>();
  }
  return values_.back().get();
}

std::string shape_text(const std::vector<int64_t>& shape) {
  std::ostringstream o;
  o << "[";
  for (size_t i = 0; i < shape.size(); ++i) o << (i ? ", " : "") << shape[i];
  o << "]";
  return o.str();
}

std::string summarize(const Value& v) {
  std::ostringstream o;
  switch (v.kind) {
    case Kind::kNone:
      return "None";
    case Kind::kBool:
      return v.b ? "True" : "False";
    case Kind::kInt:
      o << v.i;
      return o.str();
    case Kind::kBigInt:
      o << "int (" << v.s.size() << "-byte)";
      return o.str();
    case Kind::kFloat:
      o << v.f;
      return o.str();
    case Kind::kStr: {
      std::string t = v.s.size() > 60 ? v.s.substr(0, 57) + "..." : v.s;
      return "'" + t + "'";
    }
    case Kind::kBytes:
      o << "bytes[" << v.s.size() << "]";
      return o.str();
    case Kind::kList:
    case Kind::kTuple:
    case Kind::kSet:
      o << kind_name(v.kind) << "[" << v.items.size() << "]";
      return o.str();
    case Kind::kDict:
      o << "dict[" << v.entries.size() << "]";
      return o.str();
    case Kind::kGlobal:
      return "global " + v.qualname();
    case Kind::kObject:
      return "object " + v.qualname() + " (not constructed)";
    case Kind::kStorage:
      return "storage " + v.tensor->dtype.name() + " key=" + v.tensor->storage_key + " " +
             v.tensor->location;
    case Kind::kTensor: {
      const TensorRecord& t = *v.tensor;
      o << "tensor " << t.dtype.name() << " " << shape_text(t.shape) << " " << t.nbytes() << " B "
        << t.location;
      return o.str();
    }
  }
  return "?";
}

}  // namespace ckpt::verify
