#include "verify/pickle/interpret.h"

#include <cstring>
#include <map>

#include "ckpt/format/dtype.h"

namespace ckpt::verify {
namespace {

Status bad(Interpreter& in, const std::string& what) {
  return corrupt(in.where + ": pickle " + what);
}

const Value* arg(const Value* args, size_t i) {
  if (args == nullptr || args->kind != Kind::kTuple || i >= args->items.size()) return nullptr;
  return args->items[i];
}

size_t nargs(const Value* args) {
  return args != nullptr && args->kind == Kind::kTuple ? args->items.size() : 0;
}

// torch.<X>Storage → (dtype, element size); UntypedStorage counts bytes.
bool storage_dtype(const std::string& name, AnyDType* dtype) {
  static const std::map<std::string, std::string> kMap = {{"DoubleStorage", "float64"},
                                                          {"FloatStorage", "float32"},
                                                          {"HalfStorage", "float16"},
                                                          {"BFloat16Storage", "bfloat16"},
                                                          {"LongStorage", "int64"},
                                                          {"IntStorage", "int32"},
                                                          {"ShortStorage", "int16"},
                                                          {"CharStorage", "int8"},
                                                          {"ByteStorage", "uint8"},
                                                          {"BoolStorage", "bool"},
                                                          {"ComplexDoubleStorage", "complex128"},
                                                          {"ComplexFloatStorage", "complex64"},
                                                          {"QInt8Storage", "qint8"},
                                                          {"QUInt8Storage", "quint8"},
                                                          {"QInt32Storage", "qint32"},
                                                          {"QUInt4x2Storage", "quint4x2"},
                                                          {"QUInt2x4Storage", "quint4x2"},
                                                          {"UntypedStorage", "uint8"}};
  auto it = kMap.find(name);
  if (it == kMap.end()) return false;
  *dtype = AnyDType::from_name(it->second);
  return true;
}

// torch dtype global names ("float", "half", "float8_e4m3fn") → ckpt spelling.
std::string torch_dtype_name(const std::string& n) {
  static const std::map<std::string, std::string> kAlias = {
      {"float", "float32"},    {"double", "float64"},     {"half", "float16"},
      {"long", "int64"},       {"int", "int32"},          {"short", "int16"},
      {"cfloat", "complex64"}, {"cdouble", "complex128"}, {"chalf", "complex32"}};
  auto it = kAlias.find(n);
  return it == kAlias.end() ? n : it->second;
}

Status shape_of(Interpreter& in, const Value* v, std::vector<int64_t>* out, const char* what) {
  out->clear();
  if (v == nullptr || (v->kind != Kind::kTuple && v->kind != Kind::kList)) {
    return bad(in, std::string("tensor ") + what + " is not a tuple");
  }
  for (const Value* d : v->items) {
    auto x = d->as_int();
    if (!x || *x < 0)
      return bad(in, std::string("tensor ") + what + " has a non-integer or negative entry");
    out->push_back(*x);
  }
  return Status::ok();
}

// storage_offset + Σ (size_i − 1)·stride_i < storage elements, without overflow.
Status check_extent(Interpreter& in, const TensorRecord& t) {
  if (t.numel() < 0) return bad(in, "tensor shape overflows");
  if (t.numel() == 0 || t.location == "meta") return Status::ok();
  if (t.stride.size() != t.shape.size())
    return bad(in, "tensor stride rank differs from its shape rank");
  __int128 last = t.storage_offset;
  for (size_t k = 0; k < t.shape.size(); ++k) {
    if (t.stride[k] < 0) return bad(in, "tensor has a negative stride");
    last += static_cast<__int128>(t.shape[k] - 1) * t.stride[k];
  }
  __int128 elems = t.storage_numel;
  if (t.element_size != 0 && t.rebuild == "_rebuild_tensor_v3") {
    elems = t.storage_numel / static_cast<int64_t>(t.element_size);  // untyped: bytes
  }
  if (t.storage_offset < 0 || last >= elems) {
    return bad(in, "tensor on storage \"" + t.storage_key + "\" extends past its storage (" +
                       std::to_string(t.storage_numel) + " elements)");
  }
  return Status::ok();
}

Result<Value*> rebuild_tensor(Interpreter& in, const std::string& fn, const Value* args) {
  const Value* st = arg(args, 0);
  if (st == nullptr || st->kind != Kind::kStorage) {
    return bad(in, fn + " without a storage persistent id");
  }
  CKPT_ASSIGN_OR_RETURN(Value * v, in.make(Kind::kTensor));
  TensorRecord& t = *v->tensor;
  t = *st->tensor;
  t.rebuild = fn;
  auto off = arg(args, 1) != nullptr ? arg(args, 1)->as_int() : std::nullopt;
  if (!off) return bad(in, fn + ": storage offset is not an integer");
  t.storage_offset = *off;
  CKPT_RETURN_IF_ERROR(shape_of(in, arg(args, 2), &t.shape, "size"));
  CKPT_RETURN_IF_ERROR(shape_of(in, arg(args, 3), &t.stride, "stride"));
  if (const Value* rg = arg(args, 4)) t.requires_grad = rg->kind == Kind::kBool && rg->b;
  if (fn == "_rebuild_tensor_v3") {
    const Value* dt = arg(args, 6);
    if (dt == nullptr || dt->kind != Kind::kGlobal) return bad(in, fn + " without a dtype");
    t.dtype = AnyDType::from_name(torch_dtype_name(dt->name));
    t.element_size = torch_dtype_size(t.dtype);
    if (t.element_size == 0) return bad(in, fn + ": unknown dtype torch." + dt->name);
  }
  CKPT_RETURN_IF_ERROR(check_extent(in, t));
  return v;
}

std::string latin1_bytes(const std::string& utf8) {
  // Each code point 0-255 (encoded as UTF-8 by protocol 2) is one byte of the original.
  std::string out;
  out.reserve(utf8.size());
  for (size_t k = 0; k < utf8.size(); ++k) {
    unsigned char c = static_cast<unsigned char>(utf8[k]);
    if ((c & 0xE0) == 0xC0 && k + 1 < utf8.size()) {
      out.push_back(
          static_cast<char>(((c & 0x1F) << 6) | (static_cast<unsigned char>(utf8[k + 1]) & 0x3F)));
      ++k;
    } else {
      out.push_back(static_cast<char>(c));
    }
  }
  return out;
}

// numpy dtype object → (typestr like "<u4", kind char, element size).
bool numpy_dtype(const Value* d, std::string* code, size_t* size) {
  if (d == nullptr || d->kind != Kind::kObject || d->qualname() != "numpy.dtype") return false;
  const Value* a = arg(d->args, 0);
  if (a == nullptr || a->kind != Kind::kStr || a->s.size() < 2) return false;
  *code = a->s;
  size_t digits = 0;
  for (char c : a->s.substr(1)) {
    if (c < '0' || c > '9') return false;
    digits = digits * 10 + static_cast<size_t>(c - '0');
    if (digits > 64) return false;
  }
  *size = digits;
  return true;
}

}  // namespace

size_t torch_dtype_size(const AnyDType& t) {
  if (t.known()) return dtype_size(*t.known());
  const std::string dtype = t.name();
  if (dtype == "float8_e5m2fnuz" || dtype == "float8_e4m3fnuz" || dtype == "float8_e8m0fnu" ||
      dtype == "bits8" || dtype == "float4_e2m1fn_x2") {
    return 1;
  }
  if (dtype == "bits16") return 2;
  return 0;
}

std::string normalize_module(const std::string& m) {
  if (m == "__builtin__") return "builtins";
  if (m == "copy_reg") return "copyreg";
  if (m.rfind("numpy._core", 0) == 0) return "numpy.core" + m.substr(11);
  return m;
}

Result<Value*> interpret_persistent_id(Interpreter& in, Value* pid) {
  // ('storage', storage_type, key, location, numel[, view_metadata (legacy)])
  if (pid->kind == Kind::kTuple && pid->items.size() >= 5 && pid->items[0]->is_str("storage")) {
    const Value* type = pid->items[1];
    const Value* key = pid->items[2];
    const Value* loc = pid->items[3];
    auto numel = pid->items[4]->as_int();
    CKPT_ASSIGN_OR_RETURN(Value * v, in.make(Kind::kStorage));
    TensorRecord& t = *v->tensor;
    if (type->kind != Kind::kGlobal || !storage_dtype(type->name, &t.dtype)) {
      return bad(in, "persistent id names an unknown storage type " + summarize(*type));
    }
    t.element_size = torch_dtype_size(t.dtype);
    if (key->kind == Kind::kStr) {
      t.storage_key = key->s;
    } else if (key->kind == Kind::kInt) {
      t.storage_key = std::to_string(key->i);
    } else {
      return bad(in, "persistent id storage key is not a string");
    }
    if (loc->kind != Kind::kStr) return bad(in, "persistent id location is not a string");
    t.location = loc->s;
    if (!numel || *numel < 0) return bad(in, "persistent id numel is not a non-negative integer");
    t.storage_numel = *numel;
    const bool untyped = type->name == "UntypedStorage";
    uint64_t es = untyped ? 1 : t.element_size;
    if (static_cast<uint64_t>(*numel) > UINT64_MAX / es)
      return bad(in, "persistent id numel overflows");
    t.storage_nbytes = static_cast<uint64_t>(*numel) * es;
    return v;
  }
  return bad(in, "persistent id is not a ('storage', type, key, location, numel) tuple: " +
                     summarize(*pid));
}

namespace {

// torch._utils rebuilds: tensors, parameters, meta and device tensors. nullptr when not one.
Result<Value*> rebuild_torch(Interpreter& in, const std::string& name, const Value* args) {
  if (name == "_rebuild_tensor_v2" || name == "_rebuild_tensor_v3" || name == "_rebuild_tensor") {
    return rebuild_tensor(in, name, args);
  }
  if (name == "_rebuild_parameter" || name == "_rebuild_parameter_with_state") {
    const Value* data = arg(args, 0);
    if (data != nullptr && data->kind == Kind::kTensor) return const_cast<Value*>(data);
    return nullptr;
  }
  if (name != "_rebuild_meta_tensor_no_storage" &&
      name != "_rebuild_device_tensor_from_cpu_tensor") {
    return nullptr;
  }
  CKPT_ASSIGN_OR_RETURN(Value * v, in.make(Kind::kTensor));
  TensorRecord& t = *v->tensor;
  t.rebuild = name;
  if (name == "_rebuild_meta_tensor_no_storage") {
    const Value* dt = arg(args, 0);
    if (dt != nullptr && dt->kind == Kind::kGlobal)
      t.dtype = AnyDType::from_name(torch_dtype_name(dt->name));
    t.element_size = torch_dtype_size(t.dtype);
    CKPT_RETURN_IF_ERROR(shape_of(in, arg(args, 1), &t.shape, "size"));
    t.location = "meta";
    return v;
  }
  const Value* data = arg(args, 0);
  if (data != nullptr && data->kind == Kind::kTensor) t = *data->tensor;
  if (const Value* dev = arg(args, 2); dev != nullptr && dev->kind == Kind::kStr)
    t.location = dev->s;
  t.rebuild = name;
  return v;
}

// OrderedDict / Counter / dict(src) / defaultdict(factory).
Result<Value*> make_dict_from(Interpreter& in, const std::string& q, const Value* args) {
  CKPT_ASSIGN_OR_RETURN(Value * d, in.make(Kind::kDict));
  const Value* src = q == "collections.defaultdict" ? nullptr : arg(args, 0);
  if (src != nullptr && src->kind == Kind::kDict) {
    d->entries = src->entries;
    d->depth = src->depth;
  } else if (src != nullptr && (src->kind == Kind::kList || src->kind == Kind::kTuple)) {
    for (const Value* pair : src->items) {
      if ((pair->kind == Kind::kTuple || pair->kind == Kind::kList) && pair->items.size() == 2) {
        d->entries.emplace_back(pair->items[0], pair->items[1]);
      }
    }
    d->depth = src->depth;
  }
  return d;
}

Result<Value*> make_set_from(Interpreter& in, const Value* args) {
  CKPT_ASSIGN_OR_RETURN(Value * s, in.make(Kind::kSet));
  const Value* src = arg(args, 0);
  if (src != nullptr &&
      (src->kind == Kind::kList || src->kind == Kind::kTuple || src->kind == Kind::kSet)) {
    s->items = src->items;
    s->depth = src->depth;
  }
  return s;
}

// _codecs.encode(str, "latin1") (how protocol 2 spells bytes), bytes(...), bytearray(...).
Result<Value*> make_bytes_from(Interpreter& in, const Value* args) {
  const Value* src = arg(args, 0);
  const Value* enc = arg(args, 1);
  CKPT_ASSIGN_OR_RETURN(Value * b, in.make(Kind::kBytes));
  if (src != nullptr && src->kind == Kind::kStr) {
    bool latin1 = enc != nullptr && enc->kind == Kind::kStr &&
                  (enc->s == "latin1" || enc->s == "latin-1" || enc->s == "iso-8859-1");
    b->s = latin1 ? latin1_bytes(src->s) : src->s;
  } else if (src != nullptr && src->kind == Kind::kBytes) {
    b->s = src->s;
  }
  return b;
}

Result<Value*> make_device(Interpreter& in, const Value* args) {
  CKPT_ASSIGN_OR_RETURN(Value * s, in.make(Kind::kStr));
  s->s = arg(args, 0)->s;
  if (nargs(args) >= 2 && arg(args, 1)->kind == Kind::kInt)
    s->s += ":" + std::to_string(arg(args, 1)->i);
  return s;
}

// numpy.core.multiarray.scalar(dtype, raw bytes) → an int or float; nullptr for other kinds.
Result<Value*> numpy_scalar(Interpreter& in, const Value* args) {
  std::string code;
  size_t size = 0;
  const Value* raw = arg(args, 1);
  if (!numpy_dtype(arg(args, 0), &code, &size) || raw->kind != Kind::kBytes ||
      raw->s.size() != size || (size != 1 && size != 2 && size != 4 && size != 8)) {
    return nullptr;
  }
  char kind = code.size() > 1 ? code[1] : '?';
  uint64_t u = 0;
  for (size_t k = 0; k < size; ++k)
    u |= static_cast<uint64_t>(static_cast<uint8_t>(raw->s[k])) << (8 * k);
  if (kind == 'f' && (size == 4 || size == 8)) {
    CKPT_ASSIGN_OR_RETURN(Value * f, in.make(Kind::kFloat));
    if (size == 8) {
      std::memcpy(&f->f, &u, 8);
    } else {
      float x;
      uint32_t w = static_cast<uint32_t>(u);
      std::memcpy(&x, &w, 4);
      f->f = x;
    }
    return f;
  }
  if (kind == 'i' || kind == 'u') {
    CKPT_ASSIGN_OR_RETURN(Value * iv, in.make(Kind::kInt));
    if (kind == 'i' && size < 8 && (u >> (8 * size - 1)) & 1) u |= ~uint64_t{0} << (8 * size);
    iv->i = static_cast<int64_t>(u);
    return iv;
  }
  return nullptr;
}

// io.BytesIO: an in-memory buffer, read as the bytes it holds.
bool is_bytes_io(const std::string& qualname) {
  return qualname == "_io.BytesIO" || qualname == "io.BytesIO";
}

// The data a known constructor builds; nullptr when `callable` is not one the reader interprets.
Result<Value*> interpret_known(Interpreter& in, Value* callable, Value* args) {
  const std::string q = callable->qualname();
  const size_t n = nargs(args);
  if (callable->kind == Kind::kGlobal && callable->s == "torch._utils") {
    return rebuild_torch(in, callable->name, args);
  }
  if (q == "torch._tensor._rebuild_from_type_v2" && n >= 3) {
    Value* fn = const_cast<Value*>(arg(args, 0));
    Value* inner = const_cast<Value*>(arg(args, 2));
    if (fn->kind == Kind::kGlobal && inner->kind == Kind::kTuple)
      return interpret_call(in, fn, inner);
    return nullptr;
  }
  if (q == "collections.OrderedDict" || q == "collections.Counter" || q == "builtins.dict" ||
      q == "collections.defaultdict") {
    return make_dict_from(in, q, args);
  }
  if (q == "builtins.set" || q == "builtins.frozenset") return make_set_from(in, args);
  if (q == "_codecs.encode" || q == "builtins.bytes" || q == "builtins.bytearray") {
    return make_bytes_from(in, args);
  }
  if (is_bytes_io(q) && arg(args, 0) != nullptr && arg(args, 0)->kind == Kind::kBytes) {
    return make_bytes_from(in, args);
  }
  if (q == "torch.Size" && arg(args, 0) != nullptr && arg(args, 0)->kind == Kind::kTuple) {
    return const_cast<Value*>(arg(args, 0));
  }
  if (q == "torch.device" && n >= 1 && arg(args, 0)->kind == Kind::kStr) {
    return make_device(in, args);
  }
  if (q == "numpy.core.multiarray.scalar" && n == 2) return numpy_scalar(in, args);
  return nullptr;
}

}  // namespace

Result<Value*> interpret_call(Interpreter& in, Value* callable, Value* args) {
  CKPT_ASSIGN_OR_RETURN(Value * known, interpret_known(in, callable, args));
  if (known != nullptr) return known;
  // Anything else, known or not, is recorded and never called.
  CKPT_ASSIGN_OR_RETURN(Value * o, in.make(Kind::kObject));
  o->callable = callable;
  o->args = args;
  o->depth = args->depth + 1;
  if (o->depth > in.limits.max_depth) return bad(in, "nests too deeply");
  return o;
}

Status interpret_build(Interpreter& in, Value* obj, Value* state) {
  if (obj->kind == Kind::kObject) {
    // numpy.ndarray via _reconstruct: state = (version, shape, dtype, is_fortran, rawdata).
    if (obj->qualname() == "numpy.core.multiarray._reconstruct" && state->kind == Kind::kTuple &&
        state->items.size() >= 5) {
      std::string code;
      size_t size = 0;
      std::vector<int64_t> shape;
      const Value* raw = state->items[4];
      if (numpy_dtype(state->items[2], &code, &size) &&
          shape_of(in, state->items[1], &shape, "shape").is_ok() &&
          (raw->kind == Kind::kBytes || raw->kind == Kind::kList)) {
        obj->kind = Kind::kTensor;
        obj->tensor = std::make_unique<TensorRecord>();
        TensorRecord& t = *obj->tensor;
        t.dtype = AnyDType::other("numpy " + code);
        t.element_size = size;
        t.shape = shape;
        t.location = "numpy";
        t.rebuild = "numpy.ndarray";
        if (raw->kind == Kind::kBytes) {
          t.inline_bytes = raw;
          t.storage_nbytes = raw->s.size();
          if (t.nbytes() != raw->s.size()) {
            return bad(in, "numpy array " + code + " has " + std::to_string(raw->s.size()) +
                               " data bytes, expected " + std::to_string(t.nbytes()));
          }
        }
        return Status::ok();
      }
    }
    // io.BytesIO pickles as NEWOBJ(BytesIO, ()) then BUILD (value, position, __dict__).
    if (is_bytes_io(obj->qualname()) && state->kind == Kind::kTuple && !state->items.empty() &&
        state->items[0]->kind == Kind::kBytes) {
      obj->kind = Kind::kBytes;
      obj->s = state->items[0]->s;
      obj->callable = nullptr;
      obj->args = nullptr;
      return Status::ok();
    }
    obj->state = state;
    return Status::ok();
  }
  // OrderedDict `_metadata`, Parameter state, tensor subclasses' __dict__: nothing the audit uses.
  if (obj->kind == Kind::kDict || obj->kind == Kind::kTensor || obj->kind == Kind::kSet ||
      obj->kind == Kind::kList) {
    return Status::ok();
  }
  return bad(in, std::string("BUILD on a ") + kind_name(obj->kind));
}

}  // namespace ckpt::verify
