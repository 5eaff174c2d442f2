// libtorch's randperm for `ckpt coverage`: registers, before main, the function that draws
// torch.randperm(n, generator) exactly as PyTorch does (same CPU generator, same seeding through
// manual_seed, same algorithm), so RandomSampler and DistributedSampler orders are bit-identical
// to the ones a PyTorch run used. The only translation unit of analytics that includes
// torch. The registered function keeps one generator between calls (guarded by a mutex) so that
// consecutive draws of a RandomSampler do not re-draw the earlier permutations each time.
#include <torch/torch.h>

#include <mutex>

#include "analytics/sample_order.h"

namespace ckpt::analytics {
namespace {

struct GeneratorCache {
  std::mutex mu;
  bool valid = false;
  uint64_t n = 0;
  uint64_t seed = 0;
  uint64_t draws = 0;  // permutations already drawn from `gen`
  at::Generator gen;
};

std::vector<int64_t> draw_randperm(uint64_t n, uint64_t seed, uint64_t draws_before) {
  static GeneratorCache cache;
  std::lock_guard<std::mutex> lock(cache.mu);
  if (!cache.valid || cache.n != n || cache.seed != seed || cache.draws > draws_before) {
    cache.gen = at::make_generator<at::CPUGeneratorImpl>();
    cache.gen.set_current_seed(seed);  // what torch.Generator().manual_seed(seed) does
    cache.valid = true;
    cache.n = n;
    cache.seed = seed;
    cache.draws = 0;
  }
  const auto options = torch::TensorOptions().dtype(torch::kInt64);
  torch::Tensor perm;
  while (cache.draws <= draws_before) {
    // randperm takes the generator's own mutex itself.
    perm = at::randperm(static_cast<int64_t>(n), cache.gen, options);
    ++cache.draws;
  }
  const int64_t* data = perm.data_ptr<int64_t>();
  return std::vector<int64_t>(data, data + n);
}

[[maybe_unused]] const bool kRegistered = [] {
  register_torch_randperm(&draw_randperm);
  return true;
}();

}  // namespace
}  // namespace ckpt::analytics
