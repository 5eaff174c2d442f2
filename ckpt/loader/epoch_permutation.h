// EpochPermutation: the shuffled order of one epoch, a keyed bijection of [0, n) computed one
// position at a time in O(1) memory, so a 10^9-sample dataset never materialises its permutation.
//
// Construction: the key is derived from (seed, epoch, n) with XXH3 and splitmix64; the bijection is
// an 8-round (possibly unbalanced) Feistel network on the smallest power-of-two domain 2^k >= n,
// restricted to [0, n) by cycle walking (re-encrypt until the value falls inside [0, n)). Because
// 2^k < 2n, at() and index_of() need fewer than two Feistel evaluations on average. The algorithm
// is part of the checkpoint format: kOrderAlgorithm names it and a loader node records it, so a
// verifier can recompute any position offline. Changing it means a new algorithm name.
//
// An EpochPermutation is an immutable value (a few words); it is safe to share between threads.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

namespace ckpt::loader {

// The name recorded in a checkpoint's loader node for this order algorithm.
inline constexpr const char* kOrderAlgorithm = "feistel8-xxh3-v1";

class EpochPermutation {
 public:
  // A keyed bijection of [0, n). n must be >= 1 (throws std::invalid_argument otherwise).
  EpochPermutation(uint64_t n, uint64_t seed, uint64_t epoch);
  // The identity order of [0, n): what shuffle=false means.
  static EpochPermutation identity(uint64_t n);

  // The sample id at `position`. Throws std::out_of_range when position >= size(), like
  // std::vector::at; callers index within the epoch they own.
  uint64_t at(uint64_t position) const;
  // at() for `count` positions, written to ids[0..count). Same values, about twice the
  // throughput (sampler_bench): eight lanes go through the Feistel rounds in lockstep, so the
  // multiplier latency of one overlaps the others'. `ids` may be `positions` (in place). Throws
  // std::out_of_range like at().
  void at_many(const uint64_t* positions, size_t count, uint64_t* ids) const;
  // at_many over the contiguous positions [first, first + count).
  void at_range(uint64_t first, size_t count, uint64_t* ids) const;
  // The inverse: the position at which sample `id` appears. Throws std::out_of_range when
  // id >= size().
  uint64_t index_of(uint64_t id) const;

  uint64_t size() const { return n_; }
  bool shuffled() const { return shuffled_; }

 private:
  static constexpr int kRounds = 8;
  EpochPermutation() = default;
  uint64_t encrypt(uint64_t x) const;  // a bijection of [0, 2^bits_)
  template <size_t kLanes>
  void encrypt_lanes(const uint64_t* in, uint64_t* out) const;  // encrypt() of each lane
  uint64_t decrypt(uint64_t x) const;                           // its inverse

  uint64_t n_ = 1;
  bool shuffled_ = false;
  int bits_ = 0;  // k: the Feistel domain is [0, 2^k)
  std::array<uint64_t, kRounds> keys_{};
};

}  // namespace ckpt::loader
