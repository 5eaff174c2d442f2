#include "verify/pickle/pickle_reader.h"

#include <cmath>
#include <cstring>
#include <unordered_map>
#include <unordered_set>

#include "ckpt/format/dtype.h"
#include "verify/pickle/interpret.h"

namespace ckpt::verify {
namespace {

// The opcodes torch.load(weights_only=True)'s restricted unpickler implements (PyTorch 2.x,
// torch/_weights_only_unpickler.py); any other makes it fail.
bool weights_only_opcode(uint8_t op) {
  static const uint8_t kOps[] = {0x80, 'c',  0x81, 'R',  'b',  'a', 'e', 's', 'u',  '(', 't', 0x85,
                                 0x86, 0x87, 'N',  0x89, 0x88, ')', ']', '}', 0x8f, 'J', 'K', 'M',
                                 'G',  'X',  'U',  'Q',  'h',  'j', 'q', 'r', 0x8a, '.'};
  return std::memchr(kOps, op, sizeof kOps) != nullptr;
}

// numpy typestr ("<u4") → the numpy.dtypes class a BUILD on that dtype restores.
std::string numpy_dtype_class(std::string code) {
  if (!code.empty() && std::strchr("<>|=", code[0]) != nullptr) code.erase(0, 1);
  if (code.empty()) return "";
  const char kind = code[0];
  const std::string bits = std::to_string(std::atoi(code.c_str() + 1) * 8);
  switch (kind) {
    case 'b':
      return "BoolDType";
    case 'i':
      return "Int" + bits + "DType";
    case 'u':
      return "UInt" + bits + "DType";
    case 'f':
      return "Float" + bits + "DType";
    case 'c':
      return "Complex" + bits + "DType";
    case 'O':
      return "ObjectDType";
    default:
      return "";
  }
}

class Machine {
 public:
  Machine(const std::string& in, const std::string& where, const PickleLimits& lim, uint64_t off)
      : in_(in), where_(where), lim_(lim), pos_(off) {
    doc_ = std::make_unique<PickleDoc>();
  }

  Result<std::unique_ptr<PickleDoc>> run();
  // The doc built so far (for a scan that stopped on an error); null after a successful run().
  std::unique_ptr<PickleDoc> take_partial() { return std::move(doc_); }

 private:
  // One opcode each group; each returns the value to push, or nullptr when nothing is pushed.
  Result<Value*> step(uint8_t op);
  Result<Value*> op_stack(uint8_t op);
  Result<Value*> op_number(uint8_t op);
  Result<Value*> op_text_number(uint8_t op);
  Result<Value*> op_string(uint8_t op);
  Result<Value*> op_tuple(uint8_t op);
  Result<Value*> op_list_or_set(uint8_t op);
  Result<Value*> op_dict(uint8_t op);
  Result<Value*> op_global(uint8_t op);
  Result<Value*> op_call(uint8_t op);
  Result<Value*> op_build();
  Result<Value*> op_persistent_id(uint8_t op);
  Result<Value*> op_memo(uint8_t op);
  Result<uint64_t> text_index(const char* what);
  void mark_called(const Value* fn, int depth = 0);
  void note_getattr(const Value* fn, const Value* args);
  Status call(Value* callable, Value* args, Value** out);
  Interpreter interpreter() {
    return Interpreter{*doc_, where_, lim_, [this](Kind k) { return make(k); }};
  }

  Status fail(const std::string& what) const {
    return corrupt(where_ + ": pickle " + what + " at offset " + std::to_string(op_pos_));
  }
  Status need(uint64_t n) const {
    if (n > in_.size() - pos_) return fail("truncated (need " + std::to_string(n) + " bytes)");
    return Status::ok();
  }
  Result<uint64_t> uint_le(int n) {
    CKPT_RETURN_IF_ERROR(need(n));
    uint64_t v = 0;
    for (int k = 0; k < n; ++k)
      v |= static_cast<uint64_t>(static_cast<uint8_t>(in_[pos_ + k])) << (8 * k);
    pos_ += n;
    return v;
  }
  Result<std::string> bytes(uint64_t n) {
    CKPT_RETURN_IF_ERROR(need(n));
    std::string s = in_.substr(pos_, n);
    pos_ += n;
    return s;
  }
  Result<std::string> line() {
    size_t nl = in_.find('\n', pos_);
    if (nl == std::string::npos) return fail("truncated (unterminated line)");
    std::string s = in_.substr(pos_, nl - pos_);
    pos_ = nl + 1;
    if (!s.empty() && s.back() == '\r') s.pop_back();
    return s;
  }
  Result<Value*> make(Kind k) {
    if (doc_->size() >= lim_.max_values) {
      return fail("has more than " + std::to_string(lim_.max_values) + " values (pickle bomb?)");
    }
    return doc_->make(k);
  }
  Result<Value*> pop() {
    if (stack_.size() <= floor()) return fail("pops an empty stack");
    Value* v = stack_.back();
    stack_.pop_back();
    return v;
  }
  Result<Value*> top() {
    if (stack_.size() <= floor()) return fail("reads an empty stack");
    return stack_.back();
  }
  size_t floor() const { return marks_.empty() ? 0 : marks_.back(); }
  Result<std::vector<Value*>> pop_mark() {
    if (marks_.empty()) return fail("has no MARK to pop to");
    size_t m = marks_.back();
    marks_.pop_back();
    std::vector<Value*> items(stack_.begin() + static_cast<ptrdiff_t>(m), stack_.end());
    stack_.resize(m);
    return items;
  }
  Status add_child(Value* parent, const Value* child) {
    if (child->depth + 1 > parent->depth) parent->depth = child->depth + 1;
    if (parent->depth > lim_.max_depth) {
      return fail("nests deeper than " + std::to_string(lim_.max_depth) + " levels");
    }
    return Status::ok();
  }
  Status push_item(Value* container, Value* item) {
    if (container->kind == Kind::kList || container->kind == Kind::kSet) {
      container->items.push_back(item);
      return add_child(container, item);
    }
    // list.extend / append on a constructed object: keep the items as the object's args view.
    if (container->kind == Kind::kObject) {
      container->items.push_back(item);
      return add_child(container, item);
    }
    return fail(std::string("appends to a ") + kind_name(container->kind));
  }
  Status set_item(Value* dict, Value* k, Value* v) {
    if (dict->kind == Kind::kObject) {
      dict->entries.emplace_back(k, v);
      return add_child(dict, v);
    }
    if (dict->kind != Kind::kDict)
      return fail(std::string("sets an item on a ") + kind_name(dict->kind));
    for (auto& e : dict->entries) {
      if (same_key(e.first, k)) {
        e.second = v;
        return add_child(dict, v);
      }
    }
    dict->entries.emplace_back(k, v);
    CKPT_RETURN_IF_ERROR(add_child(dict, k));
    return add_child(dict, v);
  }
  static bool same_key(const Value* a, const Value* b) {
    if (a == b) return true;
    if (a->kind != b->kind) return false;
    switch (a->kind) {
      case Kind::kStr:
      case Kind::kBytes:
      case Kind::kBigInt:
        return a->s == b->s;
      case Kind::kInt:
        return a->i == b->i;
      case Kind::kBool:
        return a->b == b->b;
      case Kind::kNone:
        return true;
      default:
        return false;
    }
  }
  Result<Value*> make_tuple(const std::vector<Value*>& items) {
    CKPT_ASSIGN_OR_RETURN(Value * t, make(Kind::kTuple));
    for (Value* it : items) {
      t->items.push_back(it);
      CKPT_RETURN_IF_ERROR(add_child(t, it));
    }
    return t;
  }
  Result<Value*> make_int(int64_t v) {
    CKPT_ASSIGN_OR_RETURN(Value * x, make(Kind::kInt));
    x->i = v;
    return x;
  }
  Result<Value*> make_long(const std::string& le) {
    if (le.size() <= 8) {
      uint64_t u = 0;
      for (size_t k = 0; k < le.size(); ++k)
        u |= static_cast<uint64_t>(static_cast<uint8_t>(le[k])) << (8 * k);
      if (!le.empty() && le.size() < 8 && (static_cast<uint8_t>(le.back()) & 0x80)) {
        u |= ~uint64_t{0} << (8 * le.size());  // sign-extend
      }
      return make_int(static_cast<int64_t>(u));
    }
    CKPT_ASSIGN_OR_RETURN(Value * x, make(Kind::kBigInt));
    x->s = le;
    return x;
  }
  Result<Value*> make_str(Kind k, std::string s) {
    CKPT_ASSIGN_OR_RETURN(Value * x, make(k));
    x->s = std::move(s);
    return x;
  }
  Result<Value*> make_global(const std::string& module, const std::string& name) {
    CKPT_ASSIGN_OR_RETURN(Value * g, make(Kind::kGlobal));
    g->s = normalize_module(module);
    g->name = name;
    std::string q = g->s + "." + name;
    if (seen_globals_.emplace(q, 0).second) doc_->globals.emplace_back(q, classify_global(q));
    use_of_[g] = doc_->uses.size();
    doc_->uses.push_back(GlobalUse{module, name, op_pos_, false, "", ""});
    return g;
  }
  Status memo_put(uint64_t idx) {
    CKPT_ASSIGN_OR_RETURN(Value * v, top());
    if (memo_.size() >= lim_.max_memo && memo_.count(idx) == 0) {
      return fail("memo exceeds " + std::to_string(lim_.max_memo) + " entries");
    }
    memo_[idx] = v;
    return Status::ok();
  }
  Result<Value*> memo_get(uint64_t idx) {
    auto it = memo_.find(idx);
    if (it == memo_.end())
      return fail("reads memo slot " + std::to_string(idx) + " that was never set");
    return it->second;
  }
  const std::string& in_;
  std::string where_;
  PickleLimits lim_;
  uint64_t pos_;
  uint64_t op_pos_ = 0;
  std::unique_ptr<PickleDoc> doc_;
  std::vector<Value*> stack_;
  std::vector<size_t> marks_;
  std::unordered_map<uint64_t, Value*> memo_;
  std::unordered_map<std::string, int> seen_globals_;
  std::unordered_map<const Value*, size_t> use_of_;  // Global value → its entry in doc_->uses
  std::unordered_set<size_t> getattr_tainted_;       // getattr uses seen in a non-method call
};

Result<std::unique_ptr<PickleDoc>> Machine::run() {
  if (pos_ > in_.size()) return corrupt(where_ + ": pickle offset past the end of the input");
  while (true) {
    op_pos_ = pos_;
    if (pos_ >= in_.size()) return fail("truncated (no STOP opcode)");
    const uint8_t op = static_cast<uint8_t>(in_[pos_++]);
    if (op == '.') {  // STOP
      CKPT_ASSIGN_OR_RETURN(Value * r, pop());
      doc_->root = r;
      doc_->end_offset = pos_;
      return std::move(doc_);
    }
    if (doc_->weights_only_bad_opcode == 0 && !weights_only_opcode(op)) {
      doc_->weights_only_bad_opcode = op;
      doc_->weights_only_bad_offset = op_pos_;
    }
    CKPT_ASSIGN_OR_RETURN(Value * v, step(op));
    if (v != nullptr) stack_.push_back(v);
  }
}

Result<Value*> Machine::step(uint8_t op) {
  switch (op) {
    case 0x80:  // PROTO
    case 0x95:  // FRAME
    case '(':   // MARK
    case '0':   // POP
    case '1':   // POP_MARK
    case '2':   // DUP
      return op_stack(op);
    case 'N':
    case 0x88:
    case 0x89:
    case 'J':
    case 'K':
    case 'M':
    case 0x8a:
    case 0x8b:
    case 'G':
      return op_number(op);
    case 'I':
    case 'L':
    case 'F':
      return op_text_number(op);
    case 'X':
    case 0x8c:
    case 0x8d:
    case 'T':
    case 'U':
    case 'B':
    case 'C':
    case 0x8e:
    case 0x96:
    case 'S':
    case 'V':
      return op_string(op);
    case ')':
    case 't':
    case 0x85:
    case 0x86:
    case 0x87:
      return op_tuple(op);
    case ']':
    case 'l':
    case 'a':
    case 'e':
    case 0x90:
    case 0x8f:
    case 0x91:
      return op_list_or_set(op);
    case '}':
    case 'd':
    case 's':
    case 'u':
      return op_dict(op);
    case 'c':
    case 0x93:
      return op_global(op);
    case 'R':
    case 0x81:
    case 0x92:
    case 'i':
    case 'o':
      return op_call(op);
    case 'b':
      return op_build();
    case 'Q':
    case 'P':
      return op_persistent_id(op);
    case 'h':
    case 'j':
    case 'g':
    case 'q':
    case 'r':
    case 'p':
    case 0x94:
      return op_memo(op);
    case 0x97:
    case 0x98:
      return fail(
          "uses out-of-band buffers (NEXT_BUFFER/READONLY_BUFFER), which a file cannot carry");
    case 0x82:
    case 0x83:
    case 0x84:
      return fail("uses the copyreg extension registry (EXT1/2/4), which checkpoints never use");
    default: {
      char hex[8];
      std::snprintf(hex, sizeof hex, "0x%02x", op);
      return fail(std::string("has unknown opcode ") + hex);
    }
  }
}

Result<Value*> Machine::op_stack(uint8_t op) {
  if (op == 0x80) {
    CKPT_ASSIGN_OR_RETURN(uint64_t p, uint_le(1));
    if (p > 5) return fail("protocol " + std::to_string(p) + " (expected 0-5)");
    doc_->protocol = static_cast<int>(p);
  } else if (op == 0x95) {  // a length hint only
    CKPT_RETURN_IF_ERROR(uint_le(8).status());
  } else if (op == '(') {
    marks_.push_back(stack_.size());
  } else if (op == '0') {
    if (stack_.size() > floor()) {
      stack_.pop_back();
    } else if (!marks_.empty()) {
      marks_.pop_back();  // CPython's POP discards a MARK on top of the stack
    } else {
      return fail("pops an empty stack");
    }
  } else if (op == '1') {
    CKPT_RETURN_IF_ERROR(pop_mark().status());
  } else {  // DUP
    return top();
  }
  return nullptr;
}

Result<Value*> Machine::op_number(uint8_t op) {
  switch (op) {
    case 'N':
      return make(Kind::kNone);
    case 0x88:
    case 0x89: {
      CKPT_ASSIGN_OR_RETURN(Value * v, make(Kind::kBool));
      v->b = op == 0x88;
      return v;
    }
    case 'J': {
      CKPT_ASSIGN_OR_RETURN(uint64_t u, uint_le(4));
      return make_int(static_cast<int32_t>(static_cast<uint32_t>(u)));
    }
    case 'K':
    case 'M': {
      CKPT_ASSIGN_OR_RETURN(uint64_t u, uint_le(op == 'K' ? 1 : 2));
      return make_int(static_cast<int64_t>(u));
    }
    case 0x8a:
    case 0x8b: {  // LONG1, LONG4
      CKPT_ASSIGN_OR_RETURN(uint64_t n, uint_le(op == 0x8a ? 1 : 4));
      CKPT_ASSIGN_OR_RETURN(std::string le, bytes(n));
      return make_long(le);
    }
    default: {  // BINFLOAT, big-endian
      CKPT_ASSIGN_OR_RETURN(std::string b, bytes(8));
      uint64_t u = 0;
      for (int k = 0; k < 8; ++k) u = (u << 8) | static_cast<uint8_t>(b[k]);
      CKPT_ASSIGN_OR_RETURN(Value * v, make(Kind::kFloat));
      std::memcpy(&v->f, &u, 8);
      return v;
    }
  }
}

// Text INT / LONG / FLOAT (protocol 0).
Result<Value*> Machine::op_text_number(uint8_t op) {
  CKPT_ASSIGN_OR_RETURN(std::string t, line());
  if (op == 'L' && !t.empty() && t.back() == 'L') t.pop_back();
  if (op == 'I' && (t == "00" || t == "01")) {
    CKPT_ASSIGN_OR_RETURN(Value * v, make(Kind::kBool));
    v->b = t == "01";
    return v;
  }
  char* end = nullptr;
  errno = 0;
  if (op == 'F') {
    double d = std::strtod(t.c_str(), &end);
    if (t.empty() || *end != '\0') return fail("has a malformed FLOAT");
    CKPT_ASSIGN_OR_RETURN(Value * v, make(Kind::kFloat));
    v->f = d;
    return v;
  }
  long long x = std::strtoll(t.c_str(), &end, 10);
  if (t.empty() || *end != '\0' || errno == ERANGE) return fail("has a malformed or huge INT");
  return make_int(x);
}

Result<Value*> Machine::op_string(uint8_t op) {
  if (op == 'S' || op == 'V') {  // text STRING (quoted repr) / UNICODE (raw-unicode-escape)
    CKPT_ASSIGN_OR_RETURN(std::string t, line());
    if (op == 'S') {
      if (t.size() < 2 || (t.front() != '\'' && t.front() != '"') || t.back() != t.front()) {
        return fail("has a malformed STRING");
      }
      t = t.substr(1, t.size() - 2);
    }
    return make_str(Kind::kStr, std::move(t));
  }
  int width = (op == 0x8c || op == 'U' || op == 'C')     ? 1
              : (op == 0x8d || op == 0x8e || op == 0x96) ? 8
                                                         : 4;
  CKPT_ASSIGN_OR_RETURN(uint64_t n, uint_le(width));
  CKPT_ASSIGN_OR_RETURN(std::string s, bytes(n));
  bool is_text = op == 'X' || op == 0x8c || op == 0x8d || op == 'T' || op == 'U';
  return make_str(is_text ? Kind::kStr : Kind::kBytes, std::move(s));
}

Result<Value*> Machine::op_tuple(uint8_t op) {
  if (op == ')') return make_tuple({});
  if (op == 't') {
    CKPT_ASSIGN_OR_RETURN(auto items, pop_mark());
    return make_tuple(items);
  }
  size_t n = op - 0x84u;  // TUPLE1..3
  std::vector<Value*> items(n);
  for (size_t k = n; k-- > 0;) {
    CKPT_ASSIGN_OR_RETURN(items[k], pop());
  }
  return make_tuple(items);
}

Result<Value*> Machine::op_list_or_set(uint8_t op) {
  if (op == ']') return make(Kind::kList);
  if (op == 0x8f) return make(Kind::kSet);
  if (op == 'a') {
    CKPT_ASSIGN_OR_RETURN(Value * item, pop());
    CKPT_ASSIGN_OR_RETURN(Value * list, top());
    CKPT_RETURN_IF_ERROR(push_item(list, item));
    return nullptr;
  }
  CKPT_ASSIGN_OR_RETURN(auto items, pop_mark());
  if (op == 'e' || op == 0x90) {  // APPENDS, ADDITEMS
    CKPT_ASSIGN_OR_RETURN(Value * list, top());
    for (Value* it : items) CKPT_RETURN_IF_ERROR(push_item(list, it));
    return nullptr;
  }
  CKPT_ASSIGN_OR_RETURN(Value * v, make(op == 'l' ? Kind::kList : Kind::kSet));  // LIST, FROZENSET
  for (Value* it : items) CKPT_RETURN_IF_ERROR(push_item(v, it));
  return v;
}

Result<Value*> Machine::op_dict(uint8_t op) {
  if (op == '}') return make(Kind::kDict);
  if (op == 's') {
    CKPT_ASSIGN_OR_RETURN(Value * val, pop());
    CKPT_ASSIGN_OR_RETURN(Value * key, pop());
    CKPT_ASSIGN_OR_RETURN(Value * dict, top());
    CKPT_RETURN_IF_ERROR(set_item(dict, key, val));
    return nullptr;
  }
  CKPT_ASSIGN_OR_RETURN(auto items, pop_mark());
  if (items.size() % 2 != 0) {
    return fail(std::string(op == 'd' ? "DICT" : "SETITEMS") + " with an odd number of items");
  }
  Value* dict = nullptr;
  if (op == 'd') {
    CKPT_ASSIGN_OR_RETURN(dict, make(Kind::kDict));
  } else {
    CKPT_ASSIGN_OR_RETURN(dict, top());
  }
  for (size_t k = 0; k < items.size(); k += 2)
    CKPT_RETURN_IF_ERROR(set_item(dict, items[k], items[k + 1]));
  return op == 'd' ? dict : nullptr;
}

Result<Value*> Machine::op_global(uint8_t op) {
  if (op == 'c') {
    CKPT_ASSIGN_OR_RETURN(std::string module, line());
    CKPT_ASSIGN_OR_RETURN(std::string name, line());
    return make_global(module, name);
  }
  CKPT_ASSIGN_OR_RETURN(Value * name, pop());  // STACK_GLOBAL
  CKPT_ASSIGN_OR_RETURN(Value * module, pop());
  if (name->kind != Kind::kStr || module->kind != Kind::kStr)
    return fail("STACK_GLOBAL needs two strings");
  return make_global(module->s, name->s);
}

Result<Value*> Machine::op_call(uint8_t op) {
  Value* fn = nullptr;
  Value* args = nullptr;
  Value* kwargs = nullptr;
  if (op == 'R' || op == 0x81) {  // REDUCE, NEWOBJ: fn args
    CKPT_ASSIGN_OR_RETURN(args, pop());
    CKPT_ASSIGN_OR_RETURN(fn, pop());
  } else if (op == 0x92) {  // NEWOBJ_EX: cls args kwargs
    CKPT_ASSIGN_OR_RETURN(kwargs, pop());
    CKPT_ASSIGN_OR_RETURN(args, pop());
    CKPT_ASSIGN_OR_RETURN(fn, pop());
  } else if (op == 'i') {  // INST module name (protocol 0): MARK args
    CKPT_ASSIGN_OR_RETURN(std::string module, line());
    CKPT_ASSIGN_OR_RETURN(std::string name, line());
    CKPT_ASSIGN_OR_RETURN(auto items, pop_mark());
    CKPT_ASSIGN_OR_RETURN(fn, make_global(module, name));
    CKPT_ASSIGN_OR_RETURN(args, make_tuple(items));
  } else {  // OBJ: MARK cls args...
    CKPT_ASSIGN_OR_RETURN(auto items, pop_mark());
    if (items.empty()) return fail("OBJ without a class");
    fn = items.front();
    CKPT_ASSIGN_OR_RETURN(args, make_tuple(std::vector<Value*>(items.begin() + 1, items.end())));
  }
  // NEWOBJ of a class with no arguments is cls.__new__(cls): allocation, no constructor.
  const bool no_args = args->kind == Kind::kTuple && args->items.empty() &&
                       (kwargs == nullptr || kwargs->entries.empty());
  if (!((op == 0x81 || op == 0x92) && no_args)) mark_called(fn);
  note_getattr(fn, args);
  Value* v = nullptr;
  CKPT_RETURN_IF_ERROR(call(fn, args, &v));
  if (op == 0x92 && v->kind == Kind::kObject && v->state == nullptr) v->state = kwargs;
  return v;
}

Result<Value*> Machine::op_build() {
  CKPT_ASSIGN_OR_RETURN(Value * state, pop());
  CKPT_ASSIGN_OR_RETURN(Value * obj, top());
  if (obj->kind == Kind::kGlobal || obj->kind == Kind::kObject) mark_called(obj);  // __setstate__
  if (obj->kind == Kind::kObject && obj->qualname() == "numpy.dtype" && obj->args != nullptr &&
      !obj->args->items.empty() && obj->args->items[0]->kind == Kind::kStr) {
    std::string cls = numpy_dtype_class(obj->args->items[0]->s);
    if (!cls.empty()) doc_->numpy_dtype_builds.emplace_back(cls, op_pos_);
  }
  Interpreter in = interpreter();
  Status s = interpret_build(in, obj, state);
  if (!s.is_ok() && !lim_.lenient) return s;
  if (obj->kind == Kind::kObject) CKPT_RETURN_IF_ERROR(add_child(obj, state));
  return nullptr;
}

Result<Value*> Machine::op_persistent_id(uint8_t op) {
  Value* pid = nullptr;
  if (op == 'Q') {  // BINPERSID
    CKPT_ASSIGN_OR_RETURN(pid, pop());
  } else {  // PERSID
    CKPT_ASSIGN_OR_RETURN(std::string t, line());
    CKPT_ASSIGN_OR_RETURN(pid, make_str(Kind::kStr, std::move(t)));
  }
  Interpreter in = interpreter();
  auto r = interpret_persistent_id(in, pid);
  if (r.is_ok() || !lim_.lenient) return r;
  CKPT_ASSIGN_OR_RETURN(Value * o, make(Kind::kObject));
  o->args = pid;
  return o;
}

Result<uint64_t> Machine::text_index(const char* what) {
  CKPT_ASSIGN_OR_RETURN(std::string t, line());
  char* end = nullptr;
  unsigned long long i = std::strtoull(t.c_str(), &end, 10);
  if (t.empty() || *end != '\0') return fail(std::string("has a malformed ") + what);
  return static_cast<uint64_t>(i);
}

Result<Value*> Machine::op_memo(uint8_t op) {
  if (op == 'h' || op == 'j') {  // BINGET, LONG_BINGET
    CKPT_ASSIGN_OR_RETURN(uint64_t i, uint_le(op == 'h' ? 1 : 4));
    return memo_get(i);
  }
  if (op == 'g') {
    CKPT_ASSIGN_OR_RETURN(uint64_t i, text_index("GET"));
    return memo_get(i);
  }
  uint64_t idx = memo_.size();  // MEMOIZE
  if (op == 'q' || op == 'r') {
    CKPT_ASSIGN_OR_RETURN(idx, uint_le(op == 'q' ? 1 : 4));
  } else if (op == 'p') {
    CKPT_ASSIGN_OR_RETURN(idx, text_index("PUT"));
  }
  CKPT_RETURN_IF_ERROR(memo_put(idx));
  return nullptr;
}

// Marks the globals behind `fn` as called. Calling an object calls what made it (its class's
// __call__, a partial's function); data constructors that call an argument are followed too.
void Machine::mark_called(const Value* fn, int depth) {
  if (fn == nullptr || depth > 16) return;
  if (fn->kind == Kind::kGlobal) {
    auto it = use_of_.find(fn);
    if (it != use_of_.end()) doc_->uses[it->second].called = true;
    return;
  }
  if (fn->kind != Kind::kObject || fn->callable == nullptr) return;
  const std::string q = fn->callable->qualname();
  if (q == "builtins.getattr" && fn->callable->kind == Kind::kGlobal) {
    auto it = use_of_.find(fn->callable);  // a fetched attribute that is then called
    if (it != use_of_.end()) {
      getattr_tainted_.insert(it->second);
      doc_->uses[it->second].bound_method_of.clear();
    }
  }
  if ((q == "functools.partial" || q == "functools.partialmethod") && fn->args != nullptr &&
      !fn->args->items.empty()) {
    mark_called(fn->args->items[0], depth + 1);
  }
  mark_called(fn->callable, depth + 1);
}

// builtins.getattr(obj, "name") on an object the pickle built: how pickle saves a bound method.
// Any other getattr call through the same global taints it for good.
void Machine::note_getattr(const Value* fn, const Value* args) {
  if (fn->kind != Kind::kGlobal || fn->s != "builtins" || fn->name != "getattr") return;
  auto it = use_of_.find(fn);
  if (it == use_of_.end()) return;
  GlobalUse& u = doc_->uses[it->second];
  const Value* obj =
      args->kind == Kind::kTuple && args->items.size() == 2 ? args->items[0] : nullptr;
  const Value* attr = obj != nullptr ? args->items[1] : nullptr;
  // A method of an object the pickle built, or a plain attribute of a class it references
  // (torch 1.13 pickles SWALR's anneal_func as getattr(SWALR, '_cosine_anneal'); mmengine's
  // HistoryBuffer its statistics as getattr(HistoryBuffer, 'min')).
  const bool of_object = obj != nullptr && obj->kind == Kind::kObject && obj->callable != nullptr &&
                         obj->callable->kind == Kind::kGlobal;
  const bool of_class = obj != nullptr && obj->kind == Kind::kGlobal;
  const bool bound_method = (of_object || of_class) && attr->kind == Kind::kStr &&
                            !attr->s.empty() && attr->s.rfind("__", 0) != 0 &&
                            attr->s.find('.') == std::string::npos;
  if (bound_method && getattr_tainted_.count(it->second) == 0) {
    if (u.bound_method_of.empty()) {
      u.bound_method_of = of_object ? obj->callable->qualname() : obj->qualname();
      u.attribute = attr->s;
    }
    return;
  }
  getattr_tainted_.insert(it->second);
  u.bound_method_of.clear();
  u.attribute.clear();
}

Status Machine::call(Value* callable, Value* args, Value** out) {
  // Data constructors that call one of their arguments on load.
  const std::string q = callable->qualname();
  if (args->kind == Kind::kTuple && !args->items.empty()) {
    if (q == "torch._tensor._rebuild_from_type_v2" || q == "copyreg.__newobj__" ||
        q == "copyreg.__newobj_ex__" || q == "torch._utils._rebuild_wrapper_subclass") {
      mark_called(args->items[0]);
    } else if (q == "copyreg._reconstructor") {
      mark_called(args->items[0]);
      if (args->items.size() > 1) mark_called(args->items[1]);
    }
  }
  Interpreter in = interpreter();
  auto r = interpret_call(in, callable, args);
  if (!r.is_ok()) {
    if (!lim_.lenient) return r.status();
    CKPT_ASSIGN_OR_RETURN(Value * o, make(Kind::kObject));  // kept opaque, as any unknown call
    o->callable = callable;
    o->args = args;
    *out = o;
    return Status::ok();
  }
  *out = r.value();
  return Status::ok();
}

}  // namespace

Result<std::unique_ptr<PickleDoc>> read_pickle(const std::string& bytes, const std::string& where,
                                               const PickleLimits& limits, uint64_t offset) {
  Machine m(bytes, where, limits, offset);
  return m.run();
}

PickleScan scan_pickle(const std::string& bytes, const std::string& where,
                       const PickleLimits& limits, uint64_t offset) {
  Machine m(bytes, where, limits, offset);
  auto r = m.run();
  if (r.is_ok()) return PickleScan{std::move(r).value(), Status::ok()};
  PickleScan out{m.take_partial(), r.status()};
  if (out.doc == nullptr) out.doc = std::make_unique<PickleDoc>();
  return out;
}

}  // namespace ckpt::verify
