#include "ckpt/torch/extra_state.h"

#include <ATen/ATen.h>

#include <type_traits>

#include "ckpt/base/text.h"
#include "ckpt/torch/tensor_convert.h"

namespace ckpt::torch_adapter {

Status capture_extra(const ExtraRegistry& extra, Node* out) {
  Node node;
  for (const auto& [name, value] : extra.values()) {
    if (auto t = std::get_if<torch::Tensor*>(&value)) {
      Result<Tensor> ct = to_ckpt_tensor(**t);
      if (!ct.is_ok()) return ct.status().with_context("extra tensor " + in_quotes(name));
      node.tensors[name] = std::move(ct).value();
    } else if (auto d = std::get_if<double*>(&value)) {
      node.attrs[name] = **d;
    } else if (auto i = std::get_if<int64_t*>(&value)) {
      node.attrs[name] = **i;
    } else {
      node.attrs[name] = *std::get<std::string*>(value);
    }
  }
  *out = std::move(node);
  return Status::ok();
}

Status restore_extra(const Node& in, ExtraRegistry& extra) {
  // Validate every value first so a failed restore changes nothing.
  for (const auto& [name, value] : extra.values()) {
    if (auto t = std::get_if<torch::Tensor*>(&value)) {
      const Tensor* src = in.find_tensor(name);
      if (src == nullptr) return not_found("extra tensor " + in_quotes(name) + " is missing");
      if ((*t)->defined()) {
        CKPT_RETURN_IF_ERROR(check_compatible(*src, **t, "extra/" + name));
      }
      continue;
    }
    const AttrValue* a = in.find_attr(name);
    if (a == nullptr) return not_found("extra value " + in_quotes(name) + " is missing");
    const bool ok = std::visit(
        [&](auto* p) {
          using T = std::remove_pointer_t<decltype(p)>;
          if constexpr (std::is_same_v<T, at::Tensor>) {
            return false;  // tensors were handled above
          } else {
            return std::holds_alternative<T>(*a);
          }
        },
        value);
    if (!ok) {
      return mismatch("extra value " + in_quotes(name) + " is stored with another type than " +
                      "the one registered");
    }
  }
  for (auto& [name, value] : extra.values()) {
    if (auto t = std::get_if<torch::Tensor*>(&value)) {
      const Tensor& src = *in.find_tensor(name);
      if ((*t)->defined()) {
        CKPT_RETURN_IF_ERROR(copy_into(src, **t, "extra/" + name));
      } else {
        CKPT_ASSIGN_OR_RETURN(**t, to_torch(src));
      }
      continue;
    }
    const AttrValue& a = *in.find_attr(name);
    std::visit(
        [&](auto* p) {
          using T = std::remove_pointer_t<decltype(p)>;
          if constexpr (!std::is_same_v<T, at::Tensor>) *p = std::get<T>(a);
        },
        value);
  }
  return Status::ok();
}

}  // namespace ckpt::torch_adapter
