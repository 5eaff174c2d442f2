#include "ckpt/base/hash.h"

#include <xxhash.h>
#if defined(__x86_64__) && __has_include(<xxh_x86dispatch.h>)
// libxxhash's run-time dispatch: the AVX2 / AVX-512 kernels where the CPU has them (the same
// hashes, about twice as fast on data in cache: the write pass hashes its hot bounce buffers).
#include <xxh_x86dispatch.h>
#endif

#include <cstdio>

namespace ckpt {

uint64_t xxh3_64(const void* data, size_t size) { return XXH3_64bits(data, size); }

std::string hex64(uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

bool parse_hex64(std::string_view s, uint64_t* out) {
  if (s.size() != 16) return false;
  uint64_t v = 0;
  for (char c : s) {
    int d;
    if (c >= '0' && c <= '9')
      d = c - '0';
    else if (c >= 'a' && c <= 'f')
      d = c - 'a' + 10;
    else
      return false;
    v = (v << 4) | static_cast<uint64_t>(d);
  }
  *out = v;
  return true;
}

struct Hasher::State {
  XXH3_state_t* s = XXH3_createState();
  ~State() { XXH3_freeState(s); }
};

Hasher::Hasher() : state_(new State) { reset(); }
Hasher::~Hasher() = default;
void Hasher::update(const void* data, size_t size) { XXH3_64bits_update(state_->s, data, size); }
uint64_t Hasher::digest() const { return XXH3_64bits_digest(state_->s); }
void Hasher::reset() { XXH3_64bits_reset(state_->s); }

}  // namespace ckpt
