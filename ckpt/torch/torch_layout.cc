#include "ckpt/torch/torch_layout.h"

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "ckpt/torch/optimizer_state.h"

namespace ckpt::torch_adapter {

namespace {

// torch's "step": a 0-d tensor (float32 since torch 1.12, int64 before) or a plain number.
Result<int64_t> step_of(const Node& sn, const std::string& where) {
  if (const Tensor* t = sn.find_tensor("step")) {
    if (t->numel() != 1 || t->data == nullptr) return corrupt(where + ": step is not a scalar");
    double v = 0;
    switch (t->dtype) {
      case DType::kFloat32: {
        float f;
        std::memcpy(&f, t->data, 4);
        v = f;
        break;
      }
      case DType::kFloat64:
        std::memcpy(&v, t->data, 8);
        break;
      case DType::kInt64: {
        int64_t i;
        std::memcpy(&i, t->data, 8);
        return i;
      }
      default:
        return corrupt(where + ": step has dtype " + dtype_name(t->dtype));
    }
    if (v < 0 || v != std::floor(v)) return corrupt(where + ": step is not a whole number");
    return static_cast<int64_t>(v);
  }
  if (const AttrValue* a = sn.find_attr("step")) {
    if (const auto* i = std::get_if<int64_t>(a)) return *i;
    if (const auto* d = std::get_if<double>(a)) return static_cast<int64_t>(*d);
  }
  return int64_t{0};
}

}  // namespace

bool is_torch_optimizer_layout(const Node& in) {
  return in.find_attr("ckpt.kind") != nullptr && in.find_child("param_groups") != nullptr;
}

Result<Node> optimizer_from_torch_layout(const Node& in, const torch::optim::Optimizer& opt,
                                         const torch::nn::Module& m) {
  Node live;
  CKPT_RETURN_IF_ERROR(capture_optimizer(opt, m, &live));
  const std::vector<std::string> names = live.get_strings("param_names");
  auto name_of = [&](int64_t i, const std::string& where) -> Result<std::string> {
    if (i < 0 || static_cast<size_t>(i) >= names.size()) {
      return mismatch(where + ": parameter index " + std::to_string(i) + ", the optimizer has " +
                      std::to_string(names.size()) + " parameters");
    }
    return names[static_cast<size_t>(i)];
  };
  Node out;
  out.attrs["type"] = live.attrs["type"];
  out.attrs["param_names"] = names;
  const Node* groups = in.find_child("param_groups");
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

}  // namespace ckpt::torch_adapter
