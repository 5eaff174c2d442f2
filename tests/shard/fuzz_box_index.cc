// libFuzzer target (-DCKPT_FUZZ=ON, the sanitized tree): decode_index on arbitrary bytes, which
// `ckpt verify` and every sharded restore will read from disk before trusting anything else. Any
// input must give a value or a Status, never a crash, a sanitizer report or unbounded work. What
// decodes must encode back to the same bytes, and the tiling check and a read plan over it must
// end too (plans only for small tensors: a plan's size is the caller's target, not the input's).
#include <cstddef>
#include <cstdint>
#include <string>

#include "ckpt/base/hash.h"
#include "ckpt/store/box_index.h"
#include "ckpt/store/box_tiling.h"
#include "resume/reshard_plan.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string bytes(reinterpret_cast<const char*>(data), size);
  // The header's body hash would stop almost every mutation at the hash check (a unit test
  // covers that check): write the right hash, so the fuzzer explores the structure behind it.
  if (bytes.size() >= 64) {
    const uint64_t h = ckpt::xxh3_64(bytes.data() + 64, bytes.size() - 64);
    for (int i = 0; i < 8; ++i) bytes[56 + i] = static_cast<char>(h >> (8 * i));
  }
  auto index = ckpt::store::decode_index(bytes, "fuzz.INDEX");
  if (!index.is_ok()) return 0;
  if (ckpt::store::encode_index(*index) != bytes) __builtin_trap();
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
