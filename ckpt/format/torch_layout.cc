#include "ckpt/format/torch_layout.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace ckpt {

namespace {

// torch's "step": a 0-d tensor (float32 since torch 1.12, int64 before) or a plain number.
Result<int64_t> step_of(const Node& sn, const std::string& where) {
  if (const Tensor* t = sn.find_tensor("step")) {
    if (t->numel() != 1 || t->data == nullptr) return corrupt(where + ": step is not a scalar");
    if (t->dtype == DType::kInt64) {  // exact, whatever its size
      int64_t i;
      std::memcpy(&i, t->data, sizeof i);
      return i;
    }
    const std::optional<double> v = scalar_value(*t);
    if (!v) return corrupt(where + ": step has dtype " + dtype_name(t->dtype));
    if (*v < 0 || *v != std::floor(*v)) return corrupt(where + ": step is not a whole number");
    return static_cast<int64_t>(*v);
  }
  if (const AttrValue* a = sn.find_attr("step")) {
    if (const auto* i = std::get_if<int64_t>(a)) return *i;
    if (const auto* d = std::get_if<double>(a)) return static_cast<int64_t>(*d);
  }
  return int64_t{0};
}

Node tagged(const char* kind) {
  Node n;
  n.attrs[kTorchLayoutKindAttr] = std::string(kind);
  return n;
}

Node module_to_torch_layout(const Node& in, std::map<std::string, std::string>* sources) {
  Node out = in;
  out.attrs.erase("param_names");
  out.attrs.erase("buffer_names");
  if (sources != nullptr) {
    for (const auto& [name, t] : out.tensors) (*sources)[name] = name;
  }
  return out;
}

Result<Node> optimizer_to_torch_layout(const Node& in,
                                       std::map<std::string, std::string>* sources) {
  const std::vector<std::string> names = in.get_strings("param_names");
  std::map<std::string, int64_t> index;
  for (size_t i = 0; i < names.size(); ++i) index.emplace(names[i], static_cast<int64_t>(i));
  auto index_of = [&](const std::string& name, const std::string& where) -> Result<int64_t> {
    auto it = index.find(name);
    if (it == index.end()) {
      return corrupt(where + ": parameter \"" + name + "\" is not in the optimizer's param_names");
    }
    return it->second;
  };
  Node out = tagged("dict");
  out.attrs["ckpt.order"] = std::vector<std::string>{"state", "param_groups"};
  Node& state = out.child("state") = tagged("intdict");
  std::map<int64_t, std::string> order;  // torch's order: by index
  if (const Node* saved = in.find_child("state")) {
    for (const auto& [name, sn] : saved->children) {
      const std::string where = "optimizer state/" + name;
      CKPT_ASSIGN_OR_RETURN(int64_t i, index_of(name, where));
      const std::string key = std::to_string(i);
      Node& entry = state.child(key) = tagged("dict");
      std::vector<std::string> keys;
      for (const auto& [t, tensor] : sn.tensors) {
        entry.tensors[t] = tensor;
        keys.push_back(t);
        if (sources != nullptr) (*sources)["state/" + key + "/" + t] = "state/" + name + "/" + t;
      }
      if (const AttrValue* step = sn.find_attr("step")) {
        entry.attrs["step"] = *step;
        keys.push_back("step");
      }
      entry.attrs["ckpt.order"] = keys;
      order[i] = key;
    }
  }
  std::vector<std::string> state_order;
  state_order.reserve(order.size());
  for (const auto& [i, key] : order) state_order.push_back(key);
  if (!state_order.empty()) state.attrs["ckpt.order"] = state_order;
  Node& groups = out.child("param_groups") = tagged("list");
  const Node* saved_groups = in.find_child("groups");
  const size_t n = saved_groups != nullptr ? saved_groups->children.size() : 0;
  groups.attrs["ckpt.len"] = static_cast<int64_t>(n);
  for (size_t g = 0; g < n; ++g) {
    const std::string key = std::to_string(g);
    const Node* gn = saved_groups->find_child(key);
    if (gn == nullptr)
      return corrupt("optimizer groups: no group " + key + " of " + std::to_string(n));
    Node& og = groups.child(key) = tagged("dict");
    std::vector<std::string> tuples;
    for (const auto& [k, v] : gn->attrs) {
      if (k == "params") continue;
      og.attrs[k] = v;
      const bool list = std::holds_alternative<std::vector<int64_t>>(v) ||
                        std::holds_alternative<std::vector<double>>(v) ||
                        std::holds_alternative<std::vector<std::string>>(v);
      if (list) tuples.push_back(k);  // torch keeps betas, etas, step_sizes as tuples
    }
    std::vector<int64_t> params;
    for (const std::string& p : gn->get_strings("params")) {
      CKPT_ASSIGN_OR_RETURN(int64_t i, index_of(p, "optimizer groups/" + key));
      params.push_back(i);
    }
    og.attrs["params"] = params;
    if (!tuples.empty()) og.attrs["ckpt.tuples"] = tuples;
  }
  return out;
}

}  // namespace

bool is_torch_layout(const Node& group) { return group.find_attr(kTorchLayoutKindAttr) != nullptr; }

bool is_torch_optimizer_layout(const Node& group) {
  return is_torch_layout(group) && group.find_child("param_groups") != nullptr;
}

bool is_adapter_optimizer_layout(const Node& group) {
  return !is_torch_layout(group) && group.find_child("groups") != nullptr &&
         group.find_attr("param_names") != nullptr;
}

std::string module_wrapper_prefix(const std::vector<std::string>& keys) {
  std::string prefix;
  for (bool more = !keys.empty(); more;) {
    more = false;
    for (const char* w : {"module.", "_orig_mod."}) {
      const std::string next = prefix + w;
      if (std::all_of(keys.begin(), keys.end(), [&](const std::string& k) {
            return k.size() > next.size() && k.compare(0, next.size(), next) == 0;
          })) {
        prefix = next;
        more = true;
        break;
      }
    }
  }
  return prefix;
}

std::optional<double> scalar_value(const Tensor& t) {
  if (t.numel() != 1 || t.data == nullptr) return std::nullopt;
  switch (t.dtype) {
    case DType::kFloat32: {
      float f;
      std::memcpy(&f, t.data, sizeof f);
      return f;
    }
    case DType::kFloat64: {
      double d;
      std::memcpy(&d, t.data, sizeof d);
      return d;
    }
    case DType::kInt64: {
      int64_t i;
      std::memcpy(&i, t.data, sizeof i);
      return static_cast<double>(i);
    }
    default:
      return std::nullopt;
  }
}

Result<Node> optimizer_from_torch_layout(const Node& in,
                                         const std::vector<std::string>& param_names,
                                         const std::string& type) {
  auto name_of = [&](int64_t i, const std::string& where) -> Result<std::string> {
    if (i < 0 || static_cast<size_t>(i) >= param_names.size()) {
      return mismatch(where + ": parameter index " + std::to_string(i) + ", the optimizer has " +
                      std::to_string(param_names.size()) + " parameters");
    }
    return param_names[static_cast<size_t>(i)];
  };
  Node out;
  out.attrs["type"] = type;
  out.attrs["param_names"] = param_names;
  if (const Node* groups = in.find_child("param_groups")) {
    for (const auto& [g, gn] : groups->children) {
      const std::string where = "optimizer param_groups/" + g;
      Node& og = out.child("groups").child(g);
      for (const auto& [k, v] : gn.attrs) {
        if (k.rfind("ckpt.", 0) != 0 && k != "params") og.attrs[k] = v;
      }
      std::vector<std::string> params;
      for (int64_t i : gn.get_ints("params")) {
        CKPT_ASSIGN_OR_RETURN(std::string n, name_of(i, where));
        params.push_back(n);
      }
      og.attrs["params"] = params;
    }
  }
  if (const Node* states = in.find_child("state")) {
    for (const auto& [idx, sn] : states->children) {
      const std::string where = "optimizer state/" + idx;
      int64_t i = -1;
      try {
        i = std::stoll(idx);
      } catch (const std::exception&) {
        return corrupt(where + ": not a parameter index");
      }
      CKPT_ASSIGN_OR_RETURN(std::string n, name_of(i, where));
      Node& os = out.child("state").child(n);
      for (const auto& [t, tensor] : sn.tensors) {
        if (t != "step") os.tensors[t] = tensor;
      }
      CKPT_ASSIGN_OR_RETURN(int64_t step, step_of(sn, where));
      os.attrs["step"] = step;
    }
  }
  return out;
}

Result<Node> to_torch_layout(const Node& in, TorchLayoutKind kind,
                             std::map<std::string, std::string>* sources) {
  if (kind == TorchLayoutKind::kModule) return module_to_torch_layout(in, sources);
  return optimizer_to_torch_layout(in, sources);
}

}  // namespace ckpt
