#include "ckpt/torch/rng_state.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Context.h>
#include <ATen/core/Generator.h>
#include <c10/util/Exception.h>
#include <torch/cuda.h>

#include <mutex>
#include <sstream>
#include <vector>

#include "ckpt/base/text.h"
#include "ckpt/torch/tensor_convert.h"

namespace ckpt::torch_adapter {
namespace {

// get_state() copies the generator's state into a fresh tensor; the lock keeps another thread's
// draw from tearing it (the same discipline torch.get_rng_state follows).
at::Tensor locked_get_state(at::Generator gen) {
  std::lock_guard<std::mutex> lock(gen.mutex());
  return gen.get_state();
}

void locked_set_state(at::Generator gen, const at::Tensor& state) {
  std::lock_guard<std::mutex> lock(gen.mutex());
  gen.set_state(state);
}

at::Generator cuda_generator(int64_t device) {
  return at::globalContext().defaultGenerator(
      at::Device(at::kCUDA, static_cast<c10::DeviceIndex>(device)));
}

const char* engine_kind(const GeneratorRegistry::Engine& e) {
  return std::holds_alternative<std::mt19937*>(e) ? "mt19937" : "mt19937_64";
}

// A generator state read from the checkpoint as a uint8 CPU tensor, checked for dtype and size.
Result<at::Tensor> state_tensor(const Node& n, const std::string& key, const std::string& path,
                                int64_t expected_bytes) {
  const Tensor* t = n.find_tensor(key);
  if (t == nullptr) return not_found("tensor " + in_quotes(path) + " is missing");
  if (t->dtype != DType::kUInt8 || t->shape.size() != 1) {
    return corrupt("tensor " + in_quotes(path) + ": expected a 1-d uint8 generator state, got " +
                   dtype_name(t->dtype) + " " + shape_string(t->shape));
  }
  if (expected_bytes >= 0 && t->shape[0] != expected_bytes) {
    return mismatch("tensor " + in_quotes(path) + ": expected " + std::to_string(expected_bytes) +
                    " bytes of generator state, got " + std::to_string(t->shape[0]));
  }
  Result<at::Tensor> r = to_torch(*t);
  if (!r.is_ok()) return r.status().with_context("tensor " + in_quotes(path));
  return r;
}

}  // namespace

Status capture_rng(const GeneratorRegistry& user, Node* out) {
  Node node;
  try {
    CKPT_ASSIGN_OR_RETURN(node.child("cpu").tensors["state"],
                          to_ckpt_tensor(locked_get_state(at::detail::getDefaultCPUGenerator())));
    const bool cuda = torch::cuda::is_available();
    const int64_t devices = cuda ? static_cast<int64_t>(torch::cuda::device_count()) : 0;
    node.attrs["cuda_available"] = cuda;
    node.attrs["cuda_device_count"] = devices;
    for (int64_t i = 0; i < devices; ++i) {
      CKPT_ASSIGN_OR_RETURN(node.child("cuda").tensors[std::to_string(i)],
                            to_ckpt_tensor(locked_get_state(cuda_generator(i))));
    }
  } catch (const c10::Error& e) {
    return internal_error(std::string("reading a libtorch generator state failed: ") +
                          e.what_without_backtrace());
  }
  for (const auto& [name, engine] : user.engines()) {
    std::ostringstream os;
    std::visit([&](auto* g) { os << *g; }, engine);
    Node& u = node.child("user").child(name);
    u.attrs["engine"] = std::string(engine_kind(engine));
    u.attrs["state"] = os.str();
  }
  *out = std::move(node);
  return Status::ok();
}

Status restore_rng(const Node& in, GeneratorRegistry& user, const RngRestoreOptions& options) {
  // 1. Validate and stage every state; nothing is set until all of them parse.
  const Node* cpu = in.find_child("cpu");
  if (cpu == nullptr) return not_found("rng: child \"cpu\" is missing");
  at::Tensor cpu_state;
  std::vector<at::Tensor> cuda_states;
  try {
    const int64_t cpu_bytes = locked_get_state(at::detail::getDefaultCPUGenerator()).numel();
    CKPT_ASSIGN_OR_RETURN(cpu_state, state_tensor(*cpu, "state", "rng/cpu/state", cpu_bytes));

    const int64_t saved = in.get_int("cuda_device_count", 0);
    const int64_t here =
        torch::cuda::is_available() ? static_cast<int64_t>(torch::cuda::device_count()) : 0;
    if (saved > here && !options.skip_missing_cuda) {
      return mismatch("rng: the checkpoint holds CUDA generator states for " +
                      std::to_string(saved) + " device(s), this machine has " +
                      std::to_string(here) + " (set skip_missing_cuda to ignore them)");
    }
    const Node* cuda = in.find_child("cuda");
    for (int64_t i = 0; i < std::min(saved, here); ++i) {
      const std::string key = std::to_string(i);
      if (cuda == nullptr) return not_found("rng: child \"cuda\" is missing");
      // The size differs between releases (816 bytes on 1.13, 16 on 2.x); set_state checks it.
      CKPT_ASSIGN_OR_RETURN(at::Tensor s, state_tensor(*cuda, key, "rng/cuda/" + key, -1));
      cuda_states.push_back(std::move(s));
    }
  } catch (const c10::Error& e) {
    return internal_error(std::string("reading a libtorch generator state failed: ") +
                          e.what_without_backtrace());
  }

  const Node* user_node = in.find_child("user");
  if (user_node != nullptr) {
    for (const auto& [name, n] : user_node->children) {
      if (user.engines().count(name) == 0) {
        return mismatch("rng: the checkpoint holds user generator " + in_quotes(name) +
                        ", which is not registered here");
      }
    }
  }
  std::vector<std::pair<GeneratorRegistry::Engine, GeneratorRegistry::Engine>> staged;
  std::vector<std::mt19937> tmp32(user.engines().size());
  std::vector<std::mt19937_64> tmp64(user.engines().size());
  size_t slot = 0;
  for (const auto& [name, engine] : user.engines()) {
    const std::string path = "rng/user/" + name;
    const Node* n = user_node ? user_node->find_child(name) : nullptr;
    if (n == nullptr)
      return not_found("user generator " + in_quotes(name) + " is missing (" + path + ")");
    const std::string kind = n->get_string("engine");
    if (kind != engine_kind(engine)) {
      return mismatch(path + ": engine mismatch (expected " + engine_kind(engine) + ", got " +
                      in_quotes(kind) + ")");
    }
    std::istringstream is(n->get_string("state"));
    GeneratorRegistry::Engine parsed;
    if (std::holds_alternative<std::mt19937*>(engine)) {
      is >> tmp32[slot];
      parsed = &tmp32[slot];
    } else {
      is >> tmp64[slot];
      parsed = &tmp64[slot];
    }
    if (is.fail()) return corrupt(path + ": state attribute is not a valid " + kind + " state");
    staged.emplace_back(engine, parsed);
    ++slot;
  }

  // 2. Commit.
  try {
    locked_set_state(at::detail::getDefaultCPUGenerator(), cpu_state);
    for (size_t i = 0; i < cuda_states.size(); ++i) {
      locked_set_state(cuda_generator(static_cast<int64_t>(i)), cuda_states[i]);
    }
  } catch (const c10::Error& e) {
    return corrupt(std::string("rng: libtorch refused a generator state: ") +
                   e.what_without_backtrace());
  }
  for (auto& [target, source] : staged) {
    if (auto* g = std::get_if<std::mt19937*>(&target)) {
      **g = *std::get<std::mt19937*>(source);
    } else {
      *std::get<std::mt19937_64*>(target) = *std::get<std::mt19937_64*>(source);
    }
  }
  return Status::ok();
}

}  // namespace ckpt::torch_adapter
