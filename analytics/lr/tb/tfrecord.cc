#include "analytics/lr/tb/tfrecord.h"

#include <array>

namespace ckpt::analytics::tb {
namespace {

constexpr uint32_t kCastagnoliReflected = 0x82f63b78u;
constexpr size_t kHeader = 12;  // length + its CRC
constexpr size_t kFooter = 4;   // the data's CRC

std::array<uint32_t, 256> make_table() {
  std::array<uint32_t, 256> t{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ kCastagnoliReflected : c >> 1;
    t[i] = c;
  }
  return t;
}

uint32_t load_u32(const char* p) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | static_cast<uint8_t>(p[i]);
  return v;
}

uint64_t load_u64(const char* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | static_cast<uint8_t>(p[i]);
  return v;
}

}  // namespace

uint32_t crc32c(std::string_view bytes) {
  static const std::array<uint32_t, 256> table = make_table();
  uint32_t c = 0xffffffffu;
  for (char ch : bytes) c = table[(c ^ static_cast<uint8_t>(ch)) & 0xff] ^ (c >> 8);
  return c ^ 0xffffffffu;
}

uint32_t masked_crc32c(std::string_view bytes) {
  const uint32_t c = crc32c(bytes);
  return ((c >> 15) | (c << 17)) + 0xa282ead8u;
}

bool looks_like_tfrecord(std::string_view bytes) {
  return bytes.size() >= kHeader && masked_crc32c(bytes.substr(0, 8)) == load_u32(bytes.data() + 8);
}

Result<TfRecords> split_tfrecords(std::string_view bytes, const std::string& path) {
  TfRecords out;
  size_t at = 0;
  auto torn = [&](const std::string& what) {
    out.torn = "torn last record at offset " + std::to_string(at) + ": " + what;
    out.torn_offset = at;
    return out;
  };
  while (at < bytes.size()) {
    const size_t left = bytes.size() - at;
    if (left < kHeader) {
      return torn(std::to_string(left) + " bytes, less than a record header");
    }
    const char* h = bytes.data() + at;
    if (masked_crc32c(bytes.substr(at, 8)) != load_u32(h + 8)) {
      if (at + kHeader == bytes.size()) return torn("header CRC fails where the file ends");
      return corrupt(path + ": TFRecord length CRC mismatch at offset " + std::to_string(at));
    }
    const uint64_t len = load_u64(h);
    if (len > left - kHeader || left - kHeader - len < kFooter) {
      return torn(
          std::to_string(left) + " bytes of a " +
          (len > bytes.size() ? std::string("huge") : std::to_string(len + kHeader + kFooter)) +
          "-byte record");
    }
    const std::string_view data = bytes.substr(at + kHeader, static_cast<size_t>(len));
    const size_t end = at + kHeader + static_cast<size_t>(len) + kFooter;
    if (masked_crc32c(data) != load_u32(bytes.data() + end - kFooter)) {
      if (end == bytes.size()) return torn("data CRC fails where the file ends");
      return corrupt(path + ": TFRecord data CRC mismatch in the record at offset " +
                     std::to_string(at));
    }
    out.records.push_back(data);
    at = end;
  }
  return out;
}

}  // namespace ckpt::analytics::tb
