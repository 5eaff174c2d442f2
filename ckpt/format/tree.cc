#include "ckpt/format/tree.h"

#include <cstring>

namespace ckpt {

const char* attr_type_name(const AttrValue& v) {
  switch (v.index()) {
    case 0:
      return "a bool";
    case 1:
      return "an int64";
    case 2:
      return "a double";
    case 3:
      return "a string";
    case 4:
      return "an int64 array";
    case 5:
      return "a double array";
    default:
      return "a string array";
  }
}

bool operator==(const BoxOf& a, const BoxOf& b) {
  return a.global_shape == b.global_shape && a.offsets == b.offsets && a.placement == b.placement &&
         a.owner == b.owner;
}

std::string box_problem(const BoxOf& box, const std::vector<int64_t>& shape) {
  if (box.placement != "sharded" && box.placement != "replicated" && box.placement != "flat") {
    return "unknown placement \"" + box.placement + "\"";
  }
  const size_t n = box.global_shape.size();
  if (n > 8) return "more than 8 dimensions";
  if (box.offsets.size() != n) {
    return std::to_string(box.offsets.size()) + " box offsets for a " + std::to_string(n) +
           "-d tensor";
  }
  const bool here = box.owner < 0;
  if (box.owner < -1) return "negative box owner";
  if (here && shape.size() != n) {
    return "a " + std::to_string(shape.size()) + "-d box of a " + std::to_string(n) + "-d tensor";
  }
  for (size_t d = 0; d < n; ++d) {
    const int64_t extent = box.global_shape[d], off = box.offsets[d];
    const int64_t size = here ? shape[d] : 0;
    if (extent < 0 || off < 0 || size < 0 || off > extent || size > extent - off) {
      return "box [" + std::to_string(off) + ":" + std::to_string(off + size) +
             ") along dimension " + std::to_string(d) + " is outside the tensor's extent " +
             std::to_string(extent);
    }
  }
  return "";
}

int64_t Tensor::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

Tensor Tensor::copy_of(DType dtype, std::vector<int64_t> shape, const void* bytes, size_t nbytes) {
  auto buf = std::shared_ptr<unsigned char[]>(new unsigned char[nbytes == 0 ? 1 : nbytes]);
  if (nbytes != 0) std::memcpy(buf.get(), bytes, nbytes);
  Tensor t;
  t.dtype = dtype;
  t.shape = std::move(shape);
  t.data = buf.get();
  t.nbytes = nbytes;
  t.keepalive = std::shared_ptr<const void>(buf, buf.get());
  return t;
}

Tensor Tensor::borrow(DType dtype, std::vector<int64_t> shape, const void* bytes, size_t nbytes) {
  Tensor t;
  t.dtype = dtype;
  t.shape = std::move(shape);
  t.data = bytes;
  t.nbytes = nbytes;
  return t;
}

const Node* Node::find_child(const std::string& name) const {
  auto it = children.find(name);
  return it == children.end() ? nullptr : &it->second;
}
const Tensor* Node::find_tensor(const std::string& name) const {
  auto it = tensors.find(name);
  return it == tensors.end() ? nullptr : &it->second;
}
const AttrValue* Node::find_attr(const std::string& name) const {
  auto it = attrs.find(name);
  return it == attrs.end() ? nullptr : &it->second;
}

int64_t Node::get_int(const std::string& name, int64_t fallback) const {
  const AttrValue* v = find_attr(name);
  if (v == nullptr) return fallback;
  if (auto p = std::get_if<int64_t>(v)) return *p;
  if (auto p = std::get_if<bool>(v)) return *p ? 1 : 0;
  return fallback;
}
double Node::get_double(const std::string& name, double fallback) const {
  const AttrValue* v = find_attr(name);
  if (v == nullptr) return fallback;
  if (auto p = std::get_if<double>(v)) return *p;
  if (auto p = std::get_if<int64_t>(v)) return static_cast<double>(*p);
  return fallback;
}
std::string Node::get_string(const std::string& name, const std::string& fallback) const {
  const AttrValue* v = find_attr(name);
  if (v == nullptr) return fallback;
  if (auto p = std::get_if<std::string>(v)) return *p;
  return fallback;
}
bool Node::get_bool(const std::string& name, bool fallback) const {
  const AttrValue* v = find_attr(name);
  if (v == nullptr) return fallback;
  if (auto p = std::get_if<bool>(v)) return *p;
  if (auto p = std::get_if<int64_t>(v)) return *p != 0;
  return fallback;
}
std::vector<int64_t> Node::get_ints(const std::string& name) const {
  const AttrValue* v = find_attr(name);
  if (v == nullptr) return {};
  if (auto p = std::get_if<std::vector<int64_t>>(v)) return *p;
  if (auto p = std::get_if<int64_t>(v)) return {*p};
  return {};
}
std::vector<double> Node::get_doubles(const std::string& name) const {
  const AttrValue* v = find_attr(name);
  if (v == nullptr) return {};
  if (auto p = std::get_if<std::vector<double>>(v)) return *p;
  if (auto p = std::get_if<double>(v)) return {*p};
  return {};
}
std::vector<std::string> Node::get_strings(const std::string& name) const {
  const AttrValue* v = find_attr(name);
  if (v == nullptr) return {};
  if (auto p = std::get_if<std::vector<std::string>>(v)) return *p;
  if (auto p = std::get_if<std::string>(v)) return {*p};
  return {};
}

}  // namespace ckpt
