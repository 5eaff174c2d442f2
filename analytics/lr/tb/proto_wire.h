// A bounds-checked reader of the protocol-buffer wire format: enough to walk the few fields of
// TensorBoard's Event / Summary / TensorProto messages that `ckpt lr` needs, without a schema
// compiler. It knows the wire types (varint, 64-bit, length-delimited, 32-bit), never the
// messages; callers switch on field numbers (documented in tb_events.h).
//
// A WireReader views bytes it does not own; every read checks the remaining length first, so
// truncated or hostile input ends the walk with ok() == false, never an out-of-bounds read.
// Groups (wire types 3 and 4, deprecated and unused by these messages) are refused.
// Not thread-safe per reader; readers are cheap values.
#pragma once

#include <cstdint>
#include <string_view>

namespace ckpt::analytics::tb {

enum class WireType : uint8_t { kVarint = 0, kFixed64 = 1, kBytes = 2, kFixed32 = 5 };

struct WireField {
  uint32_t number = 0;
  WireType type = WireType::kVarint;
  uint64_t varint = 0;     // kVarint; also the raw bits of kFixed64 / kFixed32
  std::string_view bytes;  // kBytes: the payload (a sub-message, a string or a packed array)

  double as_double() const;  // kFixed64 as an IEEE double
  float as_float() const;    // kFixed32 as an IEEE float
};

class WireReader {
 public:
  explicit WireReader(std::string_view bytes) : rest_(bytes) {}

  // The next field, or false at the end of the input or on malformed input (then ok() is false).
  bool next(WireField* f);
  bool ok() const { return ok_; }
  // Reads one varint from the remaining bytes (for packed arrays); false at end / on error.
  bool read_varint(uint64_t* v);

 private:
  std::string_view rest_;
  bool ok_ = true;
};

// Little-endian fixed-width values from exactly 4 / 8 bytes at `p`.
float load_float_le(const char* p);
double load_double_le(const char* p);

}  // namespace ckpt::analytics::tb
