// The two versions of the INDEX file's bytes, private to ckpt/store (box_index.h is the
// interface): version 1, one table of 28-byte box records read whole (box_index_codec.cc), and
// version 2, a head every reader reads and 16-byte records a reader picks from
// (box_index_codec2.cc). Both are friends of GlobalIndex.
#pragma once

#include <cstdint>
#include <string>

#include "ckpt/base/status.h"
#include "ckpt/store/box_index.h"

namespace ckpt::store {

// What both versions begin with: the magic, then the version (u32) at byte 8; a 64-byte header.
inline constexpr char kIndexMagic[8] = {'C', 'K', 'P', 'T', 'I', 'N', 'D', 'X'};
inline constexpr uint64_t kIndexHeaderBytes = 64;

inline uint32_t index_get32(const unsigned char* p) {
  return uint32_t{p[0]} | uint32_t{p[1]} << 8 | uint32_t{p[2]} << 16 | uint32_t{p[3]} << 24;
}
inline uint64_t index_get64(const unsigned char* p) {
  return uint64_t{index_get32(p)} | uint64_t{index_get32(p + 4)} << 32;
}

// The index version `bytes` (at least their first 64) declare. kCorrupt "<where>: ..." when they
// are shorter than the header or do not start with the magic.
Result<uint32_t> index_version(const std::string& bytes, const std::string& where);

class IndexV1Codec {
 public:
  static std::string encode(const GlobalIndex& x);
  // `bytes` holds at least the 64-byte header, with version 1's magic and version.
  static Result<GlobalIndex> decode(const std::string& bytes, const std::string& where);
};

class IndexV2Codec {
 public:
  static std::string encode(const GlobalIndex& x);
  // `bytes` holds at least the 64-byte header, with version 2's magic and version.
  static Result<GlobalIndex> decode(const std::string& bytes, const std::string& where);
  static Result<GlobalIndex> decode_head(const std::string& bytes, const std::string& where);
  static Result<uint64_t> head_bytes(const std::string& header, uint64_t file_bytes,
                                     const std::string& where);
  // The head's size of x's encoding.
  static uint64_t head_size(const GlobalIndex& x);
};

}  // namespace ckpt::store
