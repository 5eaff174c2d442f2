// torch.randperm(n, generator=g) on the CPU, reimplemented bit for bit so that `ckpt coverage`
// can replay PyTorch's RandomSampler / DistributedSampler orders without linking libtorch (the
// `ckpt` executable links no libtorch: its start-up stays in milliseconds).
//
// What PyTorch does, and so what this does:
//   - torch.Generator().manual_seed(s) seeds a 32-bit Mersenne Twister (MT19937) with the low 32
//     bits of s (at::mt19937's init_with_uint32); random() is one 32-bit output, random64() is
//     two, the first the high word.
//   - randperm's CPU kernel for n < 2^32 / 20 fills 0..n-1 and swaps position i with
//     i + random() % (n - i) for i = 0 .. n-2; for larger n it runs the "inside-out"
//     Fisher-Yates with random64() % (i + 1).
// tests/torch/randperm_test.cc checks both against at::randperm; the coverage fixtures were
// computed by PyTorch itself. A TorchCpuGenerator is not thread-safe; torch_randperm_after is.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

namespace ckpt::analytics {

class TorchCpuGenerator {
 public:
  explicit TorchCpuGenerator(uint64_t seed) : engine_(static_cast<uint32_t>(seed)) {}
  uint32_t random() { return static_cast<uint32_t>(engine_()); }
  uint64_t random64() {
    const uint64_t hi = random();
    const uint64_t lo = random();
    return (hi << 32) | lo;
  }

 private:
  std::mt19937 engine_;
};

// One torch.randperm(n, generator=gen) draw (int64, as PyTorch's default dtype).
std::vector<int64_t> torch_randperm(uint64_t n, TorchCpuGenerator& gen);

// The permutation torch.randperm(n, generator) returns after `draws_before` earlier randperm(n)
// draws from a generator freshly seeded with manual_seed(seed). Consecutive calls for increasing
// `draws_before` with the same (n, seed) continue one cached generator instead of redrawing.
std::vector<int64_t> torch_randperm_after(uint64_t n, uint64_t seed, uint64_t draws_before);

}  // namespace ckpt::analytics
