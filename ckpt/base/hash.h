// XXH3-64 hashing: one-shot and streaming, the checksum on every tensor and file of format v1.
// A Hasher is not thread-safe; use one per thread. Digests print as 16 lowercase hex digits.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

namespace ckpt {

uint64_t xxh3_64(const void* data, size_t size);

// "0123456789abcdef": 16 lowercase hex digits, zero padded.
std::string hex64(uint64_t v);
// Parses exactly 16 lowercase hex digits (the only spelling ckpt writes, so that a flipped case
// bit in a stored hash is an error, not a synonym); false on anything else.
bool parse_hex64(std::string_view s, uint64_t* out);

class Hasher {
 public:
  Hasher();
  ~Hasher();
  Hasher(const Hasher&) = delete;
  Hasher& operator=(const Hasher&) = delete;
  void update(const void* data, size_t size);
  uint64_t digest() const;
  void reset();

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace ckpt
