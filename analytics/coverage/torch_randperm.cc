#include "analytics/coverage/torch_randperm.h"

#include <limits>
#include <memory>
#include <mutex>

namespace ckpt::analytics {
namespace {

constexpr int kN = 624;
constexpr int kM = 397;

uint32_t twist(uint32_t u, uint32_t v) {
  const uint32_t mixed = (u & 0x80000000u) | (v & 0x7fffffffu);
  return (mixed >> 1) ^ ((v & 1u) ? 0x9908b0dfu : 0u);
}

uint64_t le64(std::string_view b, size_t at) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(b[at + i]);
  return v;
}

}  // namespace

TorchCpuGenerator::TorchCpuGenerator(uint64_t seed) {
  state_[0] = static_cast<uint32_t>(seed);
  for (int j = 1; j < kN; ++j) {
    state_[j] = 1812433253u * (state_[j - 1] ^ (state_[j - 1] >> 30)) + static_cast<uint32_t>(j);
  }
  left_ = 1;
  next_ = 0;
}

std::optional<TorchCpuGenerator> TorchCpuGenerator::from_state(std::string_view bytes) {
  if (bytes.size() != kStateBytes) return std::nullopt;
  TorchCpuGenerator g;
  const uint64_t left_and_seeded = le64(bytes, 8);
  const uint32_t left = static_cast<uint32_t>(left_and_seeded & 0xffffffffu);
  const uint64_t next = le64(bytes, 16);
  // `left` counts down to 1 before each twist; the left - 1 outputs before it read words
  // next .. next + left - 2, which must lie inside the state (torch's own states have
  // next + left == kN + 1, or left 1 and next 0 just after seeding).
  if (left < 1 || left > kN || next + left > kN + 1) return std::nullopt;
  for (int j = 0; j < kN; ++j) g.state_[j] = static_cast<uint32_t>(le64(bytes, 24 + 8 * j));
  g.left_ = left;
  g.next_ = static_cast<uint32_t>(next);
  return g;
}

void TorchCpuGenerator::next_state() {
  uint32_t* p = state_.data();
  left_ = kN;
  next_ = 0;
  for (int j = kN - kM + 1; --j; ++p) *p = p[kM] ^ twist(p[0], p[1]);
  for (int j = kM; --j; ++p) *p = p[kM - kN] ^ twist(p[0], p[1]);
  *p = p[kM - kN] ^ twist(p[0], state_[0]);
}

uint32_t TorchCpuGenerator::random() {
  if (--left_ == 0) next_state();
  uint32_t y = state_[next_++];
  y ^= (y >> 11);
  y ^= (y << 7) & 0x9d2c5680u;
  y ^= (y << 15) & 0xefc60000u;
  y ^= (y >> 18);
  return y;
}

namespace {

// randperm's CPU kernel into r[0, n): values < n, so uint32_t holds them for n <= 2^32.
template <typename T>
void randperm_into(uint64_t n, TorchCpuGenerator& gen, T* r) {
  if (n < std::numeric_limits<uint32_t>::max() / 20) {
    for (uint64_t i = 0; i < n; ++i) r[i] = static_cast<T>(i);
    for (uint64_t i = 0; i + 1 < n; ++i) {
      const uint64_t z = gen.random() % (n - i);
      std::swap(r[i], r[z + i]);
    }
    return;
  }
  for (uint64_t i = 0; i < n; ++i) {
    const uint64_t z = gen.random64() % (i + 1);
    r[i] = r[z];
    r[z] = static_cast<T>(i);
  }
}

// The generator torch.randperm(n) leaves behind after `draws_before` draws from manual_seed(seed),
// drawn into `out` (n values): one cached generator continues across calls with increasing
// `draws_before`; the earlier draws only advance it (skip_torch_randperm), holding no memory.
template <typename T>
void randperm_after_into(uint64_t n, uint64_t seed, uint64_t draws_before, T* out) {
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
  for (; cache.draws < draws_before; ++cache.draws) skip_torch_randperm(n, *cache.gen);
  randperm_into(n, *cache.gen, out);
  ++cache.draws;
}

}  // namespace

std::vector<int64_t> torch_randperm(uint64_t n, TorchCpuGenerator& gen) {
  std::vector<int64_t> r(n);
  randperm_into(n, gen, r.data());
  return r;
}

void skip_torch_randperm(uint64_t n, TorchCpuGenerator& gen) {
  if (n < std::numeric_limits<uint32_t>::max() / 20) {
    for (uint64_t i = 0; i + 1 < n; ++i) (void)gen.random();
    return;
  }
  for (uint64_t i = 0; i < n; ++i) (void)gen.random64();
}

std::vector<int64_t> torch_randperm_after(uint64_t n, uint64_t seed, uint64_t draws_before) {
  std::vector<int64_t> perm(n);
  randperm_after_into(n, seed, draws_before, perm.data());
  return perm;
}

std::vector<uint32_t> torch_randperm_after_u32(uint64_t n, uint64_t seed, uint64_t draws_before) {
  std::vector<uint32_t> perm(n);
  randperm_after_into(n, seed, draws_before, perm.data());
  return perm;
}

}  // namespace ckpt::analytics
