#include "analytics/lr/tb/proto_wire.h"

#include <cstring>

namespace ckpt::analytics::tb {
namespace {

uint64_t load_le(const char* p, int n) {
  uint64_t v = 0;
  for (int i = n - 1; i >= 0; --i) v = (v << 8) | static_cast<uint8_t>(p[i]);
  return v;
}

}  // namespace

float load_float_le(const char* p) {
  const uint32_t bits = static_cast<uint32_t>(load_le(p, 4));
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

double load_double_le(const char* p) {
  const uint64_t bits = load_le(p, 8);
  double d;
  std::memcpy(&d, &bits, sizeof d);
  return d;
}

double WireField::as_double() const {
  double d;
  std::memcpy(&d, &varint, sizeof d);
  return d;
}

float WireField::as_float() const {
  const uint32_t bits = static_cast<uint32_t>(varint);
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

bool WireReader::read_varint(uint64_t* v) {
  uint64_t out = 0;
  for (int shift = 0; shift < 64; shift += 7) {
    if (rest_.empty()) return ok_ = false;
    const uint8_t b = static_cast<uint8_t>(rest_.front());
    rest_.remove_prefix(1);
    // The tenth byte may only carry the top bit of a 64-bit value.
    if (shift == 63 && b > 1) return ok_ = false;
    out |= static_cast<uint64_t>(b & 0x7f) << shift;
    if ((b & 0x80) == 0) {
      *v = out;
      return true;
    }
  }
  return ok_ = false;
}

bool WireReader::next(WireField* f) {
  if (!ok_ || rest_.empty()) return false;
  uint64_t key = 0;
  if (!read_varint(&key)) return false;
  const uint64_t number = key >> 3;
  if (number == 0 || number > 0x1fffffff) return ok_ = false;
  f->number = static_cast<uint32_t>(number);
  f->bytes = {};
  switch (key & 7) {
    case 0:
      f->type = WireType::kVarint;
      return read_varint(&f->varint);
    case 1:
      if (rest_.size() < 8) return ok_ = false;
      f->type = WireType::kFixed64;
      f->varint = load_le(rest_.data(), 8);
      rest_.remove_prefix(8);
      return true;
    case 2: {
      uint64_t len = 0;
      if (!read_varint(&len)) return false;
      if (len > rest_.size()) return ok_ = false;
      f->type = WireType::kBytes;
      f->bytes = rest_.substr(0, static_cast<size_t>(len));
      rest_.remove_prefix(static_cast<size_t>(len));
      return true;
    }
    case 5:
      if (rest_.size() < 4) return ok_ = false;
      f->type = WireType::kFixed32;
      f->varint = load_le(rest_.data(), 4);
      rest_.remove_prefix(4);
      return true;
    default:
      return ok_ = false;  // groups (3, 4) and the unassigned 6, 7
  }
}

}  // namespace ckpt::analytics::tb
