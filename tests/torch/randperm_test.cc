// analytics/coverage/torch_randperm.h against libtorch's own at::randperm: the same permutations
// for the same seeds, one draw and several consecutive draws from one generator, and from a
// generator state saved by get_state() (what torchdata's RandomSampler keeps), so that `ckpt
// coverage` (which links no libtorch) replays PyTorch's sampler orders bit for bit.
#include <torch/torch.h>

#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "analytics/coverage/torch_randperm.h"

namespace {

std::vector<int64_t> libtorch_randperm(at::Generator& gen, int64_t n) {
  torch::Tensor t = at::randperm(n, gen, torch::TensorOptions().dtype(torch::kInt64));
  const int64_t* p = t.data_ptr<int64_t>();
  return std::vector<int64_t>(p, p + n);
}

}  // namespace

TEST_CASE("torch_randperm draws what at::randperm draws", "[torch][analytics]") {
  for (uint64_t seed : {uint64_t{0}, uint64_t{1}, uint64_t{42}, uint64_t{1234567},
                        (uint64_t{1} << 32) + 7, uint64_t{0xffffffffffffull}}) {
    for (int64_t n : {1, 2, 3, 10, 97, 1000, 65537}) {
      CAPTURE(seed, n);
      at::Generator gen = at::make_generator<at::CPUGeneratorImpl>();
      gen.set_current_seed(seed);
      ckpt::analytics::TorchCpuGenerator ours(seed);
      for (int draw = 0; draw < 3; ++draw) {
        CAPTURE(draw);
        REQUIRE(ckpt::analytics::torch_randperm(static_cast<uint64_t>(n), ours) ==
                libtorch_randperm(gen, n));
      }
    }
  }
}

TEST_CASE("torch_randperm_after continues one generator across draws", "[torch][analytics]") {
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>();
  gen.set_current_seed(7);
  std::vector<std::vector<int64_t>> want;
  for (int d = 0; d < 4; ++d) want.push_back(libtorch_randperm(gen, 500));
  // In order (the cached generator continues), then out of order (it is re-seeded).
  for (uint64_t d : {0, 1, 2, 3, 1, 0, 3}) {
    CAPTURE(d);
    REQUIRE(ckpt::analytics::torch_randperm_after(500, 7, d) == want[d]);
  }
}

TEST_CASE("TorchCpuGenerator::from_state continues a saved at::Generator", "[torch][analytics]") {
  for (int64_t before : {0, 1, 37, 700}) {  // draws before the save: every `left`/`next` phase
    CAPTURE(before);
    at::Generator gen = at::make_generator<at::CPUGeneratorImpl>();
    gen.set_current_seed(20261201);
    if (before > 0) libtorch_randperm(gen, before);
    const torch::Tensor state = gen.get_state();
    REQUIRE(static_cast<size_t>(state.numel()) == ckpt::analytics::TorchCpuGenerator::kStateBytes);
    const std::string bytes(reinterpret_cast<const char*>(state.data_ptr<uint8_t>()),
                            static_cast<size_t>(state.numel()));
    auto ours = ckpt::analytics::TorchCpuGenerator::from_state(bytes);
    REQUIRE(ours.has_value());
    for (int64_t n : {37, 1000, 3}) {
      CAPTURE(n);
      REQUIRE(ckpt::analytics::torch_randperm(static_cast<uint64_t>(n), *ours) ==
              libtorch_randperm(gen, n));
    }
  }
}
