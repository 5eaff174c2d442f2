// torch.randperm(n, generator=g) on the CPU, reimplemented bit for bit so that `ckpt coverage`
// can replay PyTorch's RandomSampler / DistributedSampler orders without linking libtorch (the
// `ckpt` executable links no libtorch: its start-up stays in milliseconds).
//
// What PyTorch does, and so what this does:
//   - torch.Generator().manual_seed(s) seeds a 32-bit Mersenne Twister (MT19937) with the low 32
//     bits of s (at::mt19937's init_with_uint32); random() is one 32-bit output, random64() is
//     two, the first the high word. Generator.get_state() saves the twister's words and its
//     position; from_state() continues from such bytes.
//   - randperm's CPU kernel for n < 2^32 / 20 fills 0..n-1 and swaps position i with
//     i + random() % (n - i) for i = 0 .. n-2; for larger n it runs the "inside-out"
//     Fisher-Yates with random64() % (i + 1).
// tests/torch/randperm_test.cc checks both against at::randperm; the coverage fixtures were
// computed by PyTorch itself. A TorchCpuGenerator is not thread-safe; torch_randperm_after is.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

namespace ckpt::analytics {

class TorchCpuGenerator {
 public:
  // Bytes of Generator.get_state() for a CPU generator (CPUGeneratorImplState): int64 initial
  // seed, int32 `left`, int32 seeded, uint64 `next`, 624 uint64 words of which the low 32 bits
  // are the Mersenne Twister's state, then the normal-sampler cache this does not use.
  static constexpr size_t kStateBytes = 5056;

  explicit TorchCpuGenerator(uint64_t seed);
  // The generator that Generator.set_state(bytes) makes: it continues exactly where the saved
  // one was (torchdata's RandomSampler saves the state before the epoch's randperm). nullopt
  // when `bytes` is not kStateBytes long or `left`/`next` are outside the state.
  static std::optional<TorchCpuGenerator> from_state(std::string_view bytes);

  uint32_t random();
  uint64_t random64() {
    const uint64_t hi = random();
    const uint64_t lo = random();
    return (hi << 32) | lo;
  }

 private:
  TorchCpuGenerator() = default;
  void next_state();

  // at::mt19937's data: the state words, how many outputs are left before the next twist
  // (counted down before each output) and the index of the next output.
  std::array<uint32_t, 624> state_{};
  uint32_t left_ = 1;
  uint32_t next_ = 0;
};

// One torch.randperm(n, generator=gen) draw (int64, as PyTorch's default dtype).
std::vector<int64_t> torch_randperm(uint64_t n, TorchCpuGenerator& gen);
// Advances `gen` exactly as torch_randperm(n, gen) does (n - 1 or 2n outputs), in O(1) memory.
void skip_torch_randperm(uint64_t n, TorchCpuGenerator& gen);

// The permutation torch.randperm(n, generator) returns after `draws_before` earlier randperm(n)
// draws from a generator freshly seeded with manual_seed(seed). Consecutive calls for increasing
// `draws_before` with the same (n, seed) continue one cached generator instead of redrawing.
std::vector<int64_t> torch_randperm_after(uint64_t n, uint64_t seed, uint64_t draws_before);
// The same permutation in 4 bytes a value, for n <= 2^32.
std::vector<uint32_t> torch_randperm_after_u32(uint64_t n, uint64_t seed, uint64_t draws_before);

}  // namespace ckpt::analytics
