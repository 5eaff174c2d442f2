#include "ckpt/loader/epoch_permutation.h"

#include <algorithm>
#include <stdexcept>
#include <string>
#include <utility>

#include "ckpt/base/hash.h"

namespace ckpt::loader {
namespace {

// splitmix64's output function: a full-avalanche bijective mixer of 64 bits.
uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

uint64_t low_mask(int bits) { return bits >= 64 ? ~0ULL : ((1ULL << bits) - 1); }

// Bits needed to represent n - 1 (0 for n == 1).
int domain_bits(uint64_t n) {
  int k = 0;
  for (uint64_t v = n - 1; v != 0; v >>= 1) ++k;
  return k;
}

[[noreturn]] void throw_out_of_range(const char* what, uint64_t v, uint64_t n) {
  throw std::out_of_range(std::string("EpochPermutation::") + what + " " + std::to_string(v) +
                          " outside [0, " + std::to_string(n) + ")");
}

}  // namespace

EpochPermutation::EpochPermutation(uint64_t n, uint64_t seed, uint64_t epoch)
    : n_(n), shuffled_(true), bits_(0) {
  if (n == 0) throw std::invalid_argument("EpochPermutation: dataset size must be >= 1, got 0");
  bits_ = domain_bits(n);
  // The size is part of the key so that datasets of different sizes get unrelated orders rather
  // than one being a cycle-walked restriction of the other.
  const uint64_t material[3] = {seed, epoch, n};
  uint64_t state = xxh3_64(material, sizeof(material));
  for (auto& k : keys_) {
    state += 0x9e3779b97f4a7c15ULL;  // splitmix64's Weyl sequence
    k = mix64(state);
  }
}

EpochPermutation EpochPermutation::identity(uint64_t n) {
  if (n == 0) throw std::invalid_argument("EpochPermutation: dataset size must be >= 1, got 0");
  EpochPermutation p;
  p.n_ = n;
  p.shuffled_ = false;
  p.bits_ = domain_bits(n);
  return p;
}

// Round i splits x (k bits) into hi (a bits) and lo (b bits), a + b = k, and maps it to
// lo || (hi ^ F_i(lo)): the old lo becomes the top b bits. The halves swap sizes every round,
// which lets an odd k use an unbalanced network instead of doubling the domain.
uint64_t EpochPermutation::encrypt(uint64_t x) const {
  int a = (bits_ + 1) / 2;
  int b = bits_ / 2;
  for (int i = 0; i < kRounds; ++i) {
    const uint64_t lo = x & low_mask(b);
    const uint64_t hi = x >> b;
    const uint64_t f = mix64(lo ^ keys_[i]) & low_mask(a);
    x = (lo << a) | (hi ^ f);
    std::swap(a, b);
  }
  return x;
}

template <size_t kLanes>
void EpochPermutation::encrypt_lanes(const uint64_t* in, uint64_t* out) const {
  int a = (bits_ + 1) / 2;
  int b = bits_ / 2;
  for (size_t l = 0; l < kLanes; ++l) out[l] = in[l];
  for (int i = 0; i < kRounds; ++i) {
    const uint64_t mb = low_mask(b), ma = low_mask(a);
    for (size_t l = 0; l < kLanes; ++l) {
      const uint64_t lo = out[l] & mb;
      const uint64_t hi = out[l] >> b;
      out[l] = (lo << a) | (hi ^ (mix64(lo ^ keys_[i]) & ma));
    }
    std::swap(a, b);
  }
}

uint64_t EpochPermutation::decrypt(uint64_t x) const {
  // After an even number of rounds the sizes are back where they started; undo in reverse.
  static_assert(kRounds % 2 == 0, "decrypt assumes the half sizes end where they started");
  int a = (bits_ + 1) / 2;
  int b = bits_ / 2;
  for (int i = kRounds - 1; i >= 0; --i) {
    std::swap(a, b);  // the sizes round i used
    const uint64_t lo = x >> a;
    const uint64_t hi = (x & low_mask(a)) ^ (mix64(lo ^ keys_[i]) & low_mask(a));
    x = (hi << b) | lo;
  }
  return x;
}

uint64_t EpochPermutation::at(uint64_t position) const {
  if (position >= n_) throw_out_of_range("at: position", position, n_);
  if (!shuffled_ || bits_ == 0) return position;
  // Cycle walking: the cycle of the Feistel permutation through `position` returns to [0, n),
  // so the first value inside it defines a bijection of [0, n).
  uint64_t x = encrypt(position);
  while (x >= n_) x = encrypt(x);
  return x;
}

void EpochPermutation::at_many(const uint64_t* positions, size_t count, uint64_t* ids) const {
  for (size_t i = 0; i < count; ++i) {
    if (positions[i] >= n_) throw_out_of_range("at_many: position", positions[i], n_);
  }
  constexpr size_t kLanes = 8;
  if (!shuffled_ || bits_ == 0 || count < kLanes) {
    for (size_t i = 0; i < count; ++i) ids[i] = at(positions[i]);
    return;
  }
  // Each lane holds a value still to be encrypted and the output slot it belongs to. A lane whose
  // result lands in [0, n) writes it and takes the next position; one that lands outside walks
  // on. So every batched encryption does useful work in all eight lanes until the input runs out.
  // Positions are read before any slot at or after them is written, so ids may alias positions.
  uint64_t x[kLanes];
  size_t slot[kLanes];
  bool active[kLanes];
  size_t next = 0;
  for (size_t l = 0; l < kLanes; ++l, ++next) {
    x[l] = positions[next];
    slot[l] = next;
    active[l] = true;
  }
  while (next < count) {
    uint64_t y[kLanes];
    encrypt_lanes<kLanes>(x, y);
    for (size_t l = 0; l < kLanes; ++l) {
      if (y[l] >= n_) {
        x[l] = y[l];
        continue;
      }
      ids[slot[l]] = y[l];
      if (next < count) {
        x[l] = positions[next];
        slot[l] = next++;
      } else {
        active[l] = false;
      }
    }
  }
  // The input is used up: finish the lanes still walking one at a time.
  for (size_t l = 0; l < kLanes; ++l) {
    if (!active[l]) continue;
    uint64_t v = encrypt(x[l]);
    while (v >= n_) v = encrypt(v);
    ids[slot[l]] = v;
  }
}

void EpochPermutation::at_range(uint64_t first, size_t count, uint64_t* ids) const {
  constexpr size_t kChunk = 256;
  uint64_t positions[kChunk];
  for (size_t done = 0; done < count;) {
    const size_t m = std::min(kChunk, count - done);
    for (size_t j = 0; j < m; ++j) positions[j] = first + done + j;
    at_many(positions, m, ids + done);
    done += m;
  }
}

uint64_t EpochPermutation::index_of(uint64_t id) const {
  if (id >= n_) throw_out_of_range("index_of: id", id, n_);
  if (!shuffled_ || bits_ == 0) return id;
  uint64_t x = decrypt(id);
  while (x >= n_) x = decrypt(x);
  return x;
}

}  // namespace ckpt::loader
