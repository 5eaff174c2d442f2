// libFuzzer target (-DCKPT_FUZZ=ON, the sanitized tree): decode_index (both index versions) and
// decode_index_head on arbitrary bytes, which `ckpt verify` and every sharded restore will read
// from disk before trusting anything else. Any input must give a value or a Status, never a
// crash, a sanitizer report or unbounded work. What decodes must encode back (version 1: to the
// same bytes; version 2: to bytes that decode to the same encoding), and the tiling check and a
// read plan over it must end too (plans only for small tensors: a plan's size is the caller's
// target, not the input's).
#include <cstddef>
#include <cstdint>
#include <string>

#include "ckpt/base/hash.h"
#include "ckpt/store/box_index.h"
#include "ckpt/store/box_tiling.h"
#include "resume/reshard_plan.h"

namespace {

void put64(std::string* s, size_t at, uint64_t v) {
  for (int i = 0; i < 8; ++i) (*s)[at + i] = static_cast<char>(v >> (8 * i));
}
uint64_t get64(const std::string& s, size_t at) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= uint64_t{static_cast<unsigned char>(s[at + i])} << (8 * i);
  return v;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string bytes(reinterpret_cast<const char*>(data), size);
  // The header's hashes would stop almost every mutation at the hash check (unit tests cover
  // those checks): write the right ones, so the fuzzer explores the structure behind them.
  // Version 1: the body's; version 2: the records' and the directory's.
  const bool v2 = bytes.size() >= 64 && bytes[8] == 2;
  if (bytes.size() >= 64 && !v2)
    put64(&bytes, 56, ckpt::xxh3_64(bytes.data() + 64, bytes.size() - 64));
  if (v2) {
    const uint64_t head = get64(bytes, 32);
    if (head >= 64 && head <= bytes.size()) {
      put64(&bytes, 48, ckpt::xxh3_64(bytes.data() + head, bytes.size() - head));
      put64(&bytes, 56, ckpt::xxh3_64(bytes.data() + 64, head - 64));
      // The head alone, as a restoring rank decodes it.
      (void)ckpt::store::decode_index_head(bytes.substr(0, head), "fuzz.INDEX");
    }
  }
  auto index = ckpt::store::decode_index(bytes, "fuzz.INDEX");
  if (!index.is_ok()) return 0;
  if (index->version() == 1) {
    // Version 1 is canonical: what decodes is what it encodes back to.
    if (ckpt::store::encode_index(*index, 1) != bytes) __builtin_trap();
  }
  // Whatever decodes encodes (as version 2) to bytes that decode to an index encoding the same.
  const std::string again = ckpt::store::encode_index(*index);
  auto twice = ckpt::store::decode_index(again, "fuzz.INDEX");
  if (!twice.is_ok() || ckpt::store::encode_index(*twice) != again) __builtin_trap();
  (void)ckpt::store::check_index_tiling(*index, 8);
  for (size_t t = 0; t < index->tensor_count() && t < 4; ++t) {
    const ckpt::store::IndexTensor& it = index->tensor(t);
    ckpt::resume::TargetBox target;
    target.tensor = std::string(index->tensor_name(t));
    target.extent.ndim = it.ndim;
    uint64_t numel = 1;
    for (int d = 0; d < it.ndim; ++d) target.extent.sizes[d] = it.shape[d];
    for (int d = 0; d < it.ndim && numel <= (1u << 16); ++d) {
      numel = it.shape[d] > (1 << 16) ? (1u << 17) : numel * static_cast<uint64_t>(it.shape[d]);
    }
    if (numel <= (1u << 16)) (void)ckpt::resume::plan_reshard(*index, {target});
  }
  return 0;
}
