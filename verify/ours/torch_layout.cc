#include "verify/ours/torch_layout.h"

#include <deque>
#include <set>
#include <sstream>

#include "ckpt/format/torch_layout.h"
#include "verify/formats/detect.h"
#include "verify/pickle/value.h"

namespace ckpt::verify {
namespace {

// Owns every Value of one converted tree (Values point at each other).
class Builder {
 public:
  const Value* group(const Node& n, int depth) {
    const std::string kind = n.get_string(kTorchLayoutKindAttr, "dict");
    const std::set<std::string> nones = names(n, "ckpt.none");
    std::vector<std::pair<std::string, const Value*>> entries;
    for (const auto& [k, a] : n.attrs) {
      if (k.rfind("ckpt.", 0) != 0) entries.emplace_back(k, attr(a));
    }
    for (const auto& k : nones) entries.emplace_back(k, make(Kind::kNone));
    for (const auto& [k, t] : n.tensors) entries.emplace_back(k, tensor(k, t));
    if (depth < 64) {
      for (const auto& [k, c] : n.children) entries.emplace_back(k, group(c, depth + 1));
    }
    if (kind == "list" || kind == "tuple") {
      Value* v = make(kind == "list" ? Kind::kList : Kind::kTuple);
      std::map<int64_t, const Value*> ordered;
      for (const auto& [k, x] : entries) ordered[index_of(k)] = x;
      for (const auto& [i, x] : ordered) v->items.push_back(x);
      return v;
    }
    Value* v = make(Kind::kDict);
    for (const auto& [k, x] : entries) {
      Value* key = kind == "intdict" ? make(Kind::kInt) : make(Kind::kStr);
      if (kind == "intdict") {
        key->i = index_of(k);
      } else {
        key->s = k;
      }
      v->entries.emplace_back(key, x);
    }
    return v;
  }

  Value* make(Kind k) {
    values_.emplace_back();
    values_.back().kind = k;
    return &values_.back();
  }

 private:
  static std::set<std::string> names(const Node& n, const std::string& attr_name) {
    std::set<std::string> out;
    const auto list = n.get_strings(attr_name);
    out.insert(list.begin(), list.end());
    if (list.empty() && n.find_attr(attr_name) != nullptr) {
      std::stringstream ss(n.get_string(attr_name));
      std::string item;
      while (std::getline(ss, item, ',')) {
        if (!item.empty()) out.insert(item);
      }
    }
    return out;
  }

  static int64_t index_of(const std::string& k) {
    int64_t i = 0;
    for (char c : k) {
      if (c < '0' || c > '9' || i > (int64_t{1} << 56)) return -1;
      i = i * 10 + (c - '0');
    }
    return i;
  }

  const Value* attr(const AttrValue& a) {
    if (auto p = std::get_if<bool>(&a)) {
      Value* v = make(Kind::kBool);
      v->b = *p;
      v->i = *p ? 1 : 0;
      return v;
    }
    if (auto p = std::get_if<int64_t>(&a)) return number(*p);
    if (auto p = std::get_if<double>(&a)) return number(*p);
    if (auto p = std::get_if<std::string>(&a)) return str(*p);
    Value* list = make(Kind::kList);
    if (auto p = std::get_if<std::vector<int64_t>>(&a)) {
      for (int64_t x : *p) list->items.push_back(number(x));
    } else if (auto q = std::get_if<std::vector<double>>(&a)) {
      for (double x : *q) list->items.push_back(number(x));
    } else if (auto r = std::get_if<std::vector<std::string>>(&a)) {
      for (const auto& x : *r) list->items.push_back(str(x));
    }
    return list;
  }

  const Value* number(int64_t x) {
    Value* v = make(Kind::kInt);
    v->i = x;
    return v;
  }
  const Value* number(double x) {
    Value* v = make(Kind::kFloat);
    v->f = x;
    return v;
  }
  const Value* str(const std::string& x) {
    Value* v = make(Kind::kStr);
    v->s = x;
    return v;
  }

  const Value* tensor(const std::string& name, const Tensor& t) {
    Value* v = make(Kind::kTensor);
    v->tensor = std::make_unique<TensorRecord>();
    TensorRecord& r = *v->tensor;
    r.dtype = t.dtype;
    r.element_size = dtype_size(t.dtype);
    r.shape = t.shape;
    r.location = "cpu";  // the package stores every tensor from host memory
    r.storage_key = name;
    r.storage_nbytes = t.nbytes;
    r.storage_numel = t.numel();
    tensors_[&r] = &t;
    return v;
  }

 public:
  // The scalar of a 0-d tensor whose bytes were read (--deep); nullopt otherwise.
  std::optional<double> resolve(const TensorRecord& r) const {
    auto it = tensors_.find(&r);
    if (it == tensors_.end()) return std::nullopt;
    return scalar_value(*it->second);
  }

 private:
  std::deque<Value> values_;
  std::map<const TensorRecord*, const Tensor*> tensors_;
};

}  // namespace

void detect_torch_layout(const Node& group, const std::string& name, const std::string& file,
                         CheckpointView* view) {
  Builder b;
  Value* root = b.make(Kind::kDict);
  Value* key = b.make(Kind::kStr);
  key->s = name;
  root->entries.emplace_back(key, b.group(group, 1));
  DetectContext ctx;
  ctx.source = file;
  ctx.resolve = [&b](const TensorRecord& r) { return b.resolve(r); };
  detect_components(*root, ctx, view);
}

}  // namespace ckpt::verify
