// TFRecord framing, the container of TensorBoard event files:
//
//   uint64 length (little-endian) | uint32 masked CRC-32C of those 8 bytes |
//   length bytes of data          | uint32 masked CRC-32C of the data
//
// where mask(c) = ((c >> 15) | (c << 17)) + 0xa282ead8. split_tfrecords() checks both CRCs of
// every record. A writer killed mid-record leaves a torn tail: fewer bytes than the last header
// promises, or a last record whose data CRC fails where the file ends; the records before it are
// returned and the tail is reported in `torn`. A bad CRC anywhere else is corruption.
//
// Pure functions over bytes the caller owns (records are views into them); thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "ckpt/base/status.h"

namespace ckpt::analytics::tb {

uint32_t crc32c(std::string_view bytes);
uint32_t masked_crc32c(std::string_view bytes);

struct TfRecords {
  std::vector<std::string_view> records;
  // Empty, or what is wrong with the tail ("torn last record at offset 4096: 12 of 58 bytes").
  std::string torn;
  uint64_t torn_offset = 0;
};

// True when `bytes` starts with a TFRecord header whose length CRC checks (content detection).
bool looks_like_tfrecord(std::string_view bytes);

// On failure corrupt("<path>: ...") naming the offset of the first record whose CRC fails
// before the end of the file.
Result<TfRecords> split_tfrecords(std::string_view bytes, const std::string& path);

}  // namespace ckpt::analytics::tb
