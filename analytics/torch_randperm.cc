#include "analytics/torch_randperm.h"

#include <limits>
#include <memory>
#include <mutex>
#include <numeric>

namespace ckpt::analytics {

std::vector<int64_t> torch_randperm(uint64_t n, TorchCpuGenerator& gen) {
  std::vector<int64_t> r(n);
  if (n < std::numeric_limits<uint32_t>::max() / 20) {
    std::iota(r.begin(), r.end(), int64_t{0});
    for (uint64_t i = 0; i + 1 < n; ++i) {
      const uint64_t z = gen.random() % (n - i);
      std::swap(r[i], r[z + i]);
    }
    return r;
  }
  for (uint64_t i = 0; i < n; ++i) {
    const uint64_t z = gen.random64() % (i + 1);
    r[i] = r[z];
    r[z] = static_cast<int64_t>(i);
  }
  return r;
}

std::vector<int64_t> torch_randperm_after(uint64_t n, uint64_t seed, uint64_t draws_before) {
  struct Cache {
    std::mutex mu;
    std::unique_ptr<TorchCpuGenerator> gen;
    uint64_t n = 0;
    uint64_t seed = 0;
    uint64_t draws = 0;  // permutations already drawn from `gen`
  };
  static Cache cache;
  std::lock_guard<std::mutex> lock(cache.mu);
  if (!cache.gen || cache.n != n || cache.seed != seed || cache.draws > draws_before) {
    cache.gen = std::make_unique<TorchCpuGenerator>(seed);
    cache.n = n;
    cache.seed = seed;
    cache.draws = 0;
  }
  std::vector<int64_t> perm;
  while (cache.draws <= draws_before) {
    perm = torch_randperm(n, *cache.gen);
    ++cache.draws;
  }
  return perm;
}

}  // namespace ckpt::analytics
