#include "verify/pickle/pickle_reader.h"

#include <cmath>
#include <cstring>
#include <unordered_map>

#include "ckpt/format/dtype.h"
#include "verify/pickle/interpret.h"

namespace ckpt::verify {
namespace {

class Machine {
 public:
  Machine(const std::string& in, const std::string& where, const PickleLimits& lim, uint64_t off)
      : in_(in), where_(where), lim_(lim), pos_(off) {
    doc_ = std::make_unique<PickleDoc>();
  }

  Result<std::unique_ptr<PickleDoc>> run();

 private:
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
  Result<Value*> make_tuple(std::vector<Value*> items) {
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
  Status call(Value* callable, Value* args, Value** out) {
    Interpreter in{*doc_, where_, lim_, [this](Kind k) { return make(k); }};
    auto r = interpret_call(in, callable, args);
    if (!r.is_ok()) return r.status();
    *out = r.value();
    return Status::ok();
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
};

Result<std::unique_ptr<PickleDoc>> Machine::run() {
  if (pos_ > in_.size()) return corrupt(where_ + ": pickle offset past the end of the input");
  while (true) {
    op_pos_ = pos_;
    if (pos_ >= in_.size()) return fail("truncated (no STOP opcode)");
    const uint8_t op = static_cast<uint8_t>(in_[pos_++]);
    Value* v = nullptr;
    switch (op) {
      case 0x80: {  // PROTO
        CKPT_ASSIGN_OR_RETURN(uint64_t p, uint_le(1));
        if (p > 5) return fail("protocol " + std::to_string(p) + " (expected 0-5)");
        doc_->protocol = static_cast<int>(p);
        continue;
      }
      case 0x95: {  // FRAME: a length hint only
        CKPT_ASSIGN_OR_RETURN(uint64_t n, uint_le(8));
        (void)n;
        continue;
      }
      case '.': {  // STOP
        CKPT_ASSIGN_OR_RETURN(Value * r, pop());
        doc_->root = r;
        doc_->end_offset = pos_;
        return std::move(doc_);
      }
      case '(':
        marks_.push_back(stack_.size());
        continue;
      case '0': {
        if (stack_.size() > floor()) {
          stack_.pop_back();
        } else if (!marks_.empty()) {
          marks_.pop_back();  // CPython's POP discards a MARK on top of the stack
        } else {
          return fail("pops an empty stack");
        }
        continue;
      }
      case '1': {
        CKPT_ASSIGN_OR_RETURN(auto items, pop_mark());
        continue;
      }
      case '2': {
        CKPT_ASSIGN_OR_RETURN(v, top());
        stack_.push_back(v);
        continue;
      }
      case 'N': {
        CKPT_ASSIGN_OR_RETURN(v, make(Kind::kNone));
        break;
      }
      case 0x88:
      case 0x89: {
        CKPT_ASSIGN_OR_RETURN(v, make(Kind::kBool));
        v->b = op == 0x88;
        break;
      }
      case 'J': {
        CKPT_ASSIGN_OR_RETURN(uint64_t u, uint_le(4));
        CKPT_ASSIGN_OR_RETURN(v, make_int(static_cast<int32_t>(static_cast<uint32_t>(u))));
        break;
      }
      case 'K':
      case 'M': {
        CKPT_ASSIGN_OR_RETURN(uint64_t u, uint_le(op == 'K' ? 1 : 2));
        CKPT_ASSIGN_OR_RETURN(v, make_int(static_cast<int64_t>(u)));
        break;
      }
      case 0x8a:
      case 0x8b: {  // LONG1, LONG4
        CKPT_ASSIGN_OR_RETURN(uint64_t n, uint_le(op == 0x8a ? 1 : 4));
        CKPT_ASSIGN_OR_RETURN(std::string le, bytes(n));
        CKPT_ASSIGN_OR_RETURN(v, make_long(le));
        break;
      }
      case 'G': {
        CKPT_ASSIGN_OR_RETURN(std::string b, bytes(8));
        uint64_t u = 0;
        for (int k = 0; k < 8; ++k) u = (u << 8) | static_cast<uint8_t>(b[k]);  // big-endian
        CKPT_ASSIGN_OR_RETURN(v, make(Kind::kFloat));
        std::memcpy(&v->f, &u, 8);
        break;
      }
      case 'I':
      case 'L':
      case 'F': {  // text INT / LONG / FLOAT (protocol 0)
        CKPT_ASSIGN_OR_RETURN(std::string t, line());
        if (op == 'L' && !t.empty() && t.back() == 'L') t.pop_back();
        if (op == 'I' && (t == "00" || t == "01")) {
          CKPT_ASSIGN_OR_RETURN(v, make(Kind::kBool));
          v->b = t == "01";
          break;
        }
        char* end = nullptr;
        errno = 0;
        if (op == 'F') {
          double d = std::strtod(t.c_str(), &end);
          if (t.empty() || *end != '\0') return fail("has a malformed FLOAT");
          CKPT_ASSIGN_OR_RETURN(v, make(Kind::kFloat));
          v->f = d;
        } else {
          long long x = std::strtoll(t.c_str(), &end, 10);
          if (t.empty() || *end != '\0' || errno == ERANGE)
            return fail("has a malformed or huge INT");
          CKPT_ASSIGN_OR_RETURN(v, make_int(x));
        }
        break;
      }
      case 'X':
      case 0x8c:
      case 0x8d:
      case 'T':
      case 'U':
      case 'B':
      case 'C':
      case 0x8e:
      case 0x96: {
        int width = (op == 0x8c || op == 'U' || op == 'C')     ? 1
                    : (op == 0x8d || op == 0x8e || op == 0x96) ? 8
                                                               : 4;
        CKPT_ASSIGN_OR_RETURN(uint64_t n, uint_le(width));
        CKPT_ASSIGN_OR_RETURN(std::string s, bytes(n));
        bool is_text = op == 'X' || op == 0x8c || op == 0x8d || op == 'T' || op == 'U';
        CKPT_ASSIGN_OR_RETURN(v, make_str(is_text ? Kind::kStr : Kind::kBytes, std::move(s)));
        break;
      }
      case 'S':
      case 'V': {  // text STRING (quoted repr) / UNICODE (raw-unicode-escape)
        CKPT_ASSIGN_OR_RETURN(std::string t, line());
        if (op == 'S') {
          if (t.size() < 2 || (t.front() != '\'' && t.front() != '"') || t.back() != t.front()) {
            return fail("has a malformed STRING");
          }
          t = t.substr(1, t.size() - 2);
        }
        CKPT_ASSIGN_OR_RETURN(v, make_str(Kind::kStr, std::move(t)));
        break;
      }
      case ')': {
        CKPT_ASSIGN_OR_RETURN(v, make_tuple({}));
        break;
      }
      case 't': {
        CKPT_ASSIGN_OR_RETURN(auto items, pop_mark());
        CKPT_ASSIGN_OR_RETURN(v, make_tuple(std::move(items)));
        break;
      }
      case 0x85:
      case 0x86:
      case 0x87: {
        size_t n = op - 0x84u;
        std::vector<Value*> items(n);
        for (size_t k = n; k-- > 0;) {
          CKPT_ASSIGN_OR_RETURN(items[k], pop());
        }
        CKPT_ASSIGN_OR_RETURN(v, make_tuple(std::move(items)));
        break;
      }
      case ']': {
        CKPT_ASSIGN_OR_RETURN(v, make(Kind::kList));
        break;
      }
      case 'l': {
        CKPT_ASSIGN_OR_RETURN(auto items, pop_mark());
        CKPT_ASSIGN_OR_RETURN(v, make(Kind::kList));
        for (Value* it : items) CKPT_RETURN_IF_ERROR(push_item(v, it));
        break;
      }
      case 'a': {
        CKPT_ASSIGN_OR_RETURN(Value * item, pop());
        CKPT_ASSIGN_OR_RETURN(Value * list, top());
        CKPT_RETURN_IF_ERROR(push_item(list, item));
        continue;
      }
      case 'e':
      case 0x90: {  // APPENDS, ADDITEMS
        CKPT_ASSIGN_OR_RETURN(auto items, pop_mark());
        CKPT_ASSIGN_OR_RETURN(Value * list, top());
        for (Value* it : items) CKPT_RETURN_IF_ERROR(push_item(list, it));
        continue;
      }
      case '}': {
        CKPT_ASSIGN_OR_RETURN(v, make(Kind::kDict));
        break;
      }
      case 'd': {
        CKPT_ASSIGN_OR_RETURN(auto items, pop_mark());
        if (items.size() % 2 != 0) return fail("DICT with an odd number of items");
        CKPT_ASSIGN_OR_RETURN(v, make(Kind::kDict));
        for (size_t k = 0; k < items.size(); k += 2)
          CKPT_RETURN_IF_ERROR(set_item(v, items[k], items[k + 1]));
        break;
      }
      case 's': {
        CKPT_ASSIGN_OR_RETURN(Value * val, pop());
        CKPT_ASSIGN_OR_RETURN(Value * key, pop());
        CKPT_ASSIGN_OR_RETURN(Value * dict, top());
        CKPT_RETURN_IF_ERROR(set_item(dict, key, val));
        continue;
      }
      case 'u': {
        CKPT_ASSIGN_OR_RETURN(auto items, pop_mark());
        if (items.size() % 2 != 0) return fail("SETITEMS with an odd number of items");
        CKPT_ASSIGN_OR_RETURN(Value * dict, top());
        for (size_t k = 0; k < items.size(); k += 2)
          CKPT_RETURN_IF_ERROR(set_item(dict, items[k], items[k + 1]));
        continue;
      }
      case 0x8f: {
        CKPT_ASSIGN_OR_RETURN(v, make(Kind::kSet));
        break;
      }
      case 0x91: {
        CKPT_ASSIGN_OR_RETURN(auto items, pop_mark());
        CKPT_ASSIGN_OR_RETURN(v, make(Kind::kSet));
        for (Value* it : items) CKPT_RETURN_IF_ERROR(push_item(v, it));
        break;
      }
      case 'c': {
        CKPT_ASSIGN_OR_RETURN(std::string module, line());
        CKPT_ASSIGN_OR_RETURN(std::string name, line());
        CKPT_ASSIGN_OR_RETURN(v, make_global(module, name));
        break;
      }
      case 0x93: {  // STACK_GLOBAL
        CKPT_ASSIGN_OR_RETURN(Value * name, pop());
        CKPT_ASSIGN_OR_RETURN(Value * module, pop());
        if (name->kind != Kind::kStr || module->kind != Kind::kStr)
          return fail("STACK_GLOBAL needs two strings");
        CKPT_ASSIGN_OR_RETURN(v, make_global(module->s, name->s));
        break;
      }
      case 'R':
      case 0x81: {  // REDUCE, NEWOBJ
        CKPT_ASSIGN_OR_RETURN(Value * args, pop());
        CKPT_ASSIGN_OR_RETURN(Value * fn, pop());
        CKPT_RETURN_IF_ERROR(call(fn, args, &v));
        break;
      }
      case 0x92: {  // NEWOBJ_EX cls args kwargs
        CKPT_ASSIGN_OR_RETURN(Value * kwargs, pop());
        CKPT_ASSIGN_OR_RETURN(Value * args, pop());
        CKPT_ASSIGN_OR_RETURN(Value * fn, pop());
        CKPT_RETURN_IF_ERROR(call(fn, args, &v));
        if (v->kind == Kind::kObject && v->state == nullptr) v->state = kwargs;
        break;
      }
      case 'i': {  // INST module name (protocol 0): MARK args
        CKPT_ASSIGN_OR_RETURN(std::string module, line());
        CKPT_ASSIGN_OR_RETURN(std::string name, line());
        CKPT_ASSIGN_OR_RETURN(auto items, pop_mark());
        CKPT_ASSIGN_OR_RETURN(Value * fn, make_global(module, name));
        CKPT_ASSIGN_OR_RETURN(Value * args, make_tuple(std::move(items)));
        CKPT_RETURN_IF_ERROR(call(fn, args, &v));
        break;
      }
      case 'o': {  // OBJ: MARK cls args...
        CKPT_ASSIGN_OR_RETURN(auto items, pop_mark());
        if (items.empty()) return fail("OBJ without a class");
        Value* fn = items.front();
        CKPT_ASSIGN_OR_RETURN(Value * args,
                              make_tuple(std::vector<Value*>(items.begin() + 1, items.end())));
        CKPT_RETURN_IF_ERROR(call(fn, args, &v));
        break;
      }
      case 'b': {  // BUILD
        CKPT_ASSIGN_OR_RETURN(Value * state, pop());
        CKPT_ASSIGN_OR_RETURN(Value * obj, top());
        Interpreter in{*doc_, where_, lim_, [this](Kind k) { return make(k); }};
        CKPT_RETURN_IF_ERROR(interpret_build(in, obj, state));
        if (obj->kind == Kind::kObject) CKPT_RETURN_IF_ERROR(add_child(obj, state));
        continue;
      }
      case 'Q':
      case 'P': {  // BINPERSID, PERSID
        Value* pid = nullptr;
        if (op == 'Q') {
          CKPT_ASSIGN_OR_RETURN(pid, pop());
        } else {
          CKPT_ASSIGN_OR_RETURN(std::string t, line());
          CKPT_ASSIGN_OR_RETURN(pid, make_str(Kind::kStr, std::move(t)));
        }
        Interpreter in{*doc_, where_, lim_, [this](Kind k) { return make(k); }};
        CKPT_ASSIGN_OR_RETURN(v, interpret_persistent_id(in, pid));
        break;
      }
      case 'h':
      case 'j': {
        CKPT_ASSIGN_OR_RETURN(uint64_t i, uint_le(op == 'h' ? 1 : 4));
        CKPT_ASSIGN_OR_RETURN(v, memo_get(i));
        break;
      }
      case 'g': {
        CKPT_ASSIGN_OR_RETURN(std::string t, line());
        char* end = nullptr;
        unsigned long long i = std::strtoull(t.c_str(), &end, 10);
        if (t.empty() || *end != '\0') return fail("has a malformed GET");
        CKPT_ASSIGN_OR_RETURN(v, memo_get(i));
        break;
      }
      case 'q':
      case 'r': {
        CKPT_ASSIGN_OR_RETURN(uint64_t i, uint_le(op == 'q' ? 1 : 4));
        CKPT_RETURN_IF_ERROR(memo_put(i));
        continue;
      }
      case 'p': {
        CKPT_ASSIGN_OR_RETURN(std::string t, line());
        char* end = nullptr;
        unsigned long long i = std::strtoull(t.c_str(), &end, 10);
        if (t.empty() || *end != '\0') return fail("has a malformed PUT");
        CKPT_RETURN_IF_ERROR(memo_put(i));
        continue;
      }
      case 0x94: {
        CKPT_RETURN_IF_ERROR(memo_put(memo_.size()));
        continue;
      }  // MEMOIZE
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
    stack_.push_back(v);
  }
}

}  // namespace

Result<std::unique_ptr<PickleDoc>> read_pickle(const std::string& bytes, const std::string& where,
                                               const PickleLimits& limits, uint64_t offset) {
  Machine m(bytes, where, limits, offset);
  return m.run();
}

}  // namespace ckpt::verify
