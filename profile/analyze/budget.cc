#include "profile/analyze/budget.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace ckpt::profile {

Result<Budget> budget_model(double gpus, double per_gpu_rate, double loader_cap) {
  auto bad = [](double v) { return !std::isfinite(v) || v <= 0; };
  if (bad(gpus)) return invalid_argument("budget: --gpus must be a positive number");
  if (bad(per_gpu_rate)) return invalid_argument("budget: --per-gpu must be a positive rate");
  if (bad(loader_cap)) return invalid_argument("budget: --loader-cap must be a positive rate");
  Budget b;
  b.gpus = gpus;
  b.per_gpu_rate = per_gpu_rate;
  b.loader_cap = loader_cap;
  b.demand = gpus * per_gpu_rate;
  b.supply = loader_cap;
  b.predicted_utilisation = std::min(1.0, b.supply / b.demand);
  b.gpus_to_saturate = loader_cap / per_gpu_rate;
  b.bound = b.supply < b.demand ? "input" : "compute";
  return b;
}

std::string render_budget_text(const Budget& b) {
  char buf[640];
  std::snprintf(buf, sizeof buf,
                "MODEL (not a measurement): throughput budget\n"
                "  demand  = %g GPUs x %.6g samples/s = %.6g samples/s\n"
                "  supply  = loader cap %.6g samples/s\n"
                "  predicted GPU utilisation = min(1, supply/demand) = %.1f%%\n"
                "  bound: %s; the loader saturates %.3g GPUs at this rate\n"
                "  A match with the observed utilisation says starvation explains the mean; the "
                "tail needs its own explanation.\n",
                b.gpus, b.per_gpu_rate, b.demand, b.supply, 100.0 * b.predicted_utilisation,
                b.bound == "input" ? "input (GPUs wait for data)" : "compute (the loader keeps up)",
                b.gpus_to_saturate);
  return buf;
}

}  // namespace ckpt::profile
