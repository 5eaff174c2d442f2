#include "ckpt/torch/model_state.h"

#include <torch/nn/module.h>

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "ckpt/base/text.h"
#include "ckpt/torch/in_place.h"
#include "ckpt/torch/tensor_convert.h"

namespace ckpt::torch_adapter {
namespace {

struct Entry {
  std::string name;
  at::Tensor tensor;
  bool is_param;
  // Index of the earlier entry this one is the same view of, or -1.
  int alias_of = -1;
};

bool same_view(const at::Tensor& a, const at::Tensor& b) {
  return a.storage_offset() == b.storage_offset() && a.sizes() == b.sizes() &&
         a.strides() == b.strides() && a.scalar_type() == b.scalar_type();
}

// Half-open byte range [first, last) of the storage that `t` can touch; empty for numel 0.
std::pair<int64_t, int64_t> byte_extent(const at::Tensor& t) {
  if (t.numel() == 0) return {0, 0};
  int64_t last = t.storage_offset();
  for (int64_t d = 0; d < t.dim(); ++d) last += (t.size(d) - 1) * t.stride(d);
  const int64_t es = static_cast<int64_t>(t.element_size());
  return {t.storage_offset() * es, (last + 1) * es};
}

// Parameters then buffers, in module order, with tied tensors marked. Fails on two entries that
// share bytes without being the same view.
Result<std::vector<Entry>> collect(const torch::nn::Module& m) {
  std::vector<Entry> entries;
  for (const auto& item : m.named_parameters(/*recurse=*/true)) {
    if (item.value().defined()) entries.push_back({item.key(), item.value(), true});
  }
  for (const auto& item : m.named_buffers(/*recurse=*/true)) {
    if (item.value().defined()) entries.push_back({item.key(), item.value(), false});
  }
  std::map<const void*, std::vector<size_t>> by_storage;
  for (size_t i = 0; i < entries.size(); ++i) {
    const at::Tensor& t = entries[i].tensor;
    if (!t.has_storage()) continue;
    std::vector<size_t>& seen = by_storage[t.storage().unsafeGetStorageImpl()];
    for (size_t j : seen) {
      if (entries[j].alias_of >= 0) continue;
      if (same_view(t, entries[j].tensor)) {
        entries[i].alias_of = static_cast<int>(j);
        break;
      }
      auto a = byte_extent(t);
      auto b = byte_extent(entries[j].tensor);
      if (a.first < b.second && b.first < a.second) {
        return unsupported("tensors \"" + entries[j].name + "\" and \"" + entries[i].name +
                           "\" partially overlap in one storage (bytes [" +
                           std::to_string(b.first) + ", " + std::to_string(b.second) + ") and [" +
                           std::to_string(a.first) + ", " + std::to_string(a.second) +
                           ")); only identical views can be tied");
      }
    }
    seen.push_back(i);
  }
  return entries;
}

}  // namespace

Status capture_model(const torch::nn::Module& m, Node* out) {
  CKPT_ASSIGN_OR_RETURN(std::vector<Entry> entries, collect(m));
  Node node;
  std::vector<std::string> param_names;
  std::vector<std::string> buffer_names;
  for (const Entry& e : entries) {
    (e.is_param ? param_names : buffer_names).push_back(e.name);
    Tensor t;
    if (e.alias_of >= 0) {
      // Dtype and shape travel so an auditor can check the alias without reading the target.
      Result<DType> dt = to_ckpt_dtype(e.tensor.scalar_type());
      if (!dt.is_ok()) return dt.status().with_context("tensor " + in_quotes(e.name));
      t.dtype = *dt;
      t.shape = e.tensor.sizes().vec();
      t.alias_of = entries[e.alias_of].name;
    } else {
      Result<Tensor> r = to_ckpt_tensor(e.tensor);
      if (!r.is_ok()) return r.status().with_context("tensor " + in_quotes(e.name));
      t = std::move(r).value();
    }
    node.tensors[e.name] = std::move(t);
  }
  node.attrs["param_names"] = std::move(param_names);
  node.attrs["buffer_names"] = std::move(buffer_names);
  *out = std::move(node);
  return Status::ok();
}

Result<std::vector<TensorTarget>> model_targets(const Node& in, torch::nn::Module& m) {
  CKPT_ASSIGN_OR_RETURN(std::vector<Entry> entries, collect(m));
  std::map<std::string, size_t> index;
  for (size_t i = 0; i < entries.size(); ++i) index[entries[i].name] = i;

  for (const auto& [name, t] : in.tensors) {
    if (index.count(name) == 0) {
      return mismatch("tensor " + in_quotes(name) + " is in the checkpoint but not in the module");
    }
  }
  const std::vector<std::string> ckpt_params = in.get_strings("param_names");
  const std::vector<std::string> ckpt_buffers = in.get_strings("buffer_names");
  const std::set<std::string> ckpt_param_set(ckpt_params.begin(), ckpt_params.end());
  const std::set<std::string> ckpt_buffer_set(ckpt_buffers.begin(), ckpt_buffers.end());

  // Validate everything first so a failed restore leaves the module untouched.
  std::vector<TensorTarget> targets;
  for (const Entry& e : entries) {
    const Tensor* src = in.find_tensor(e.name);
    if (src == nullptr) {
      return not_found(std::string(e.is_param ? "parameter " : "buffer ") + in_quotes(e.name) +
                       " of the module is missing from the checkpoint");
    }
    const std::set<std::string>& other = e.is_param ? ckpt_buffer_set : ckpt_param_set;
    if (other.count(e.name) != 0) {
      return mismatch("tensor " + in_quotes(e.name) + " is a " +
                      (e.is_param ? "parameter" : "buffer") + " in the module but a " +
                      (e.is_param ? "buffer" : "parameter") + " in the checkpoint");
    }
    if (!src->alias_of.empty()) {
      auto it = index.find(src->alias_of);
      if (it == index.end()) {
        return mismatch("tensor " + in_quotes(e.name) + " is saved as an alias of " +
                        in_quotes(src->alias_of) + ", which the module does not have");
      }
      const Entry& target = entries[it->second];
      const bool tied = target.tensor.has_storage() && e.tensor.has_storage() &&
                        target.tensor.storage().is_alias_of(e.tensor.storage()) &&
                        same_view(target.tensor, e.tensor);
      if (!tied) {
        return mismatch("tensor " + in_quotes(e.name) + " is saved as an alias of " +
                        in_quotes(src->alias_of) + " but in the module they are separate tensors");
      }
      continue;
    }
    if (e.alias_of >= 0) {
      return mismatch("tensor " + in_quotes(e.name) + " is tied to " +
                      in_quotes(entries[e.alias_of].name) +
                      " in the module but saved as a separate tensor in the checkpoint");
    }
    CKPT_RETURN_IF_ERROR(check_dtype_shape(*src, e.tensor, e.name));
    targets.push_back({"/model/" + e.name, e.tensor, false});
  }
  return targets;
}

Status restore_model(const Node& in, torch::nn::Module& m) {
  CKPT_ASSIGN_OR_RETURN(std::vector<TensorTarget> targets, model_targets(in, m));
  const size_t skip = std::string("/model/").size();
  for (const TensorTarget& t : targets) {
    const std::string name = t.path.substr(skip);
    CKPT_RETURN_IF_ERROR(check_compatible(in.tensors.at(name), t.tensor, name));
  }
  for (TensorTarget& t : targets) {
    const std::string name = t.path.substr(skip);
    CKPT_RETURN_IF_ERROR(copy_into(in.tensors.at(name), t.tensor, name));
  }
  return Status::ok();
}

}  // namespace ckpt::torch_adapter
