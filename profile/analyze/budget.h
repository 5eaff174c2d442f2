// The throughput-budget model (DOMAIN.md, "The analytic model"): demand = GPUs × the samples/s each
// GPU can consume, supply = the loader's maximum samples/s, predicted utilisation ≈
// min(1, supply / demand). It is a model, not a measurement, and every rendering says so.
// Pure functions over values; thread-safe.
#pragma once

#include <string>

#include "ckpt/base/status.h"

namespace ckpt::profile {

struct Budget {
  double gpus = 0;
  double per_gpu_rate = 0;  // samples/s one GPU consumes when never starved
  double loader_cap = 0;    // samples/s the input pipeline can supply in total
  double demand = 0;        // gpus × per_gpu_rate
  double supply = 0;        // loader_cap
  double predicted_utilisation = 0;
  double gpus_to_saturate = 0;  // loader_cap / per_gpu_rate: more GPUs than this only wait
  std::string bound;            // "input" or "compute"
};

// InvalidArgument when a rate or the GPU count is not positive.
Result<Budget> budget_model(double gpus, double per_gpu_rate, double loader_cap);

// "MODEL (not a measurement): ..." lines for humans.
std::string render_budget_text(const Budget& b);

}  // namespace ckpt::profile
