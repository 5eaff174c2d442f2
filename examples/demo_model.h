// What the single-process and the distributed demo share: a small MLP with dropout, a synthetic
// classification set labelled by a fixed random linear "teacher" (drawn from its own generator, so
// it is identical in every process whatever the global RNG state), the LR schedule, the sampler
// spec, and the parameter digest both print as their last line.
#pragma once

#include <torch/torch.h>

#include <string>

#include "ckpt/base/hash.h"
#include "ckpt/loader/resumable_sampler.h"
#include "ckpt/sched/schedule.h"

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

// Linear warmup over 20 steps to 3e-3, then cosine down to 1e-4 at `total_steps`.
inline ckpt::sched::ScheduleSpec make_schedule(int64_t total_steps) {
  ckpt::sched::ScheduleSpec spec;
  spec.kind = ckpt::sched::ScheduleKind::kWarmupCosine;
  spec.base_lr = 3e-3;
  spec.warmup_steps = 20;
  spec.total_steps = total_steps;
  spec.min_lr = 1e-4;
  return spec;
}

// Shuffled by ckpt's keyed order, 16 samples per rank per step.
inline ckpt::loader::SamplerSpec make_sampler_spec(const Dataset& data, uint64_t seed,
                                                   uint32_t world_size) {
  ckpt::loader::SamplerSpec s;
  s.dataset_size = static_cast<uint64_t>(data.x.size(0));
  s.dataset_fingerprint = data.fingerprint;
  s.seed = seed;
  s.shuffle = true;
  s.batch_size = 16;
  s.world_size = world_size;
  return s;
}

inline void set_lr(torch::optim::Optimizer& opt, double lr) {
  for (auto& group : opt.param_groups()) group.options().set_lr(lr);
}

// XXH3-64 over every parameter's bytes in name order: equal exactly when the runs ended
// bit-identical.
inline uint64_t params_digest(const torch::nn::Module& model) {
  ckpt::Hasher h;
  for (const auto& p : model.named_parameters(/*recurse=*/true)) {
    torch::Tensor t = p.value().detach().contiguous();
    h.update(t.data_ptr(), t.numel() * t.element_size());
  }
  return h.digest();
}

}  // namespace demo
