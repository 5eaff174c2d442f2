// The demo's model and data: a small MLP with dropout, and a synthetic classification set labelled
// by a fixed random linear "teacher". The data comes from its own generator, so it is identical in
// every process whatever the global RNG state.
#pragma once

#include <torch/torch.h>

#include <string>

namespace demo {

struct MlpImpl : torch::nn::Module {
  MlpImpl()
      : fc1(register_module("fc1", torch::nn::Linear(16, 64))),
        fc2(register_module("fc2", torch::nn::Linear(64, 64))),
        head(register_module("head", torch::nn::Linear(64, 4))),
        drop(register_module("drop", torch::nn::Dropout(0.1))) {}
  torch::Tensor forward(torch::Tensor x) {
    x = drop(torch::relu(fc1(x)));
    x = drop(torch::relu(fc2(x)));
    return head(x);
  }
  torch::nn::Linear fc1, fc2, head;
  torch::nn::Dropout drop;
};
TORCH_MODULE(Mlp);

struct Dataset {
  torch::Tensor x;  // [n, 16] float32
  torch::Tensor y;  // [n] int64, 4 classes
  std::string fingerprint;
};

inline Dataset make_dataset(int64_t n, uint64_t seed) {
  auto gen = at::detail::createCPUGenerator(seed);
  Dataset d;
  d.x = torch::randn({n, 16}, gen);
  torch::Tensor teacher = torch::randn({16, 4}, gen);
  d.y = d.x.matmul(teacher).argmax(1);
  d.fingerprint = "synthetic-mlp n=" + std::to_string(n) + " seed=" + std::to_string(seed);
  return d;
}

// Weights come from the global generator, seeded by the caller before this call.
inline Mlp make_model() { return Mlp(); }

}  // namespace demo
