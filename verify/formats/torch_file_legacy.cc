// Legacy torch.save streams (PyTorch < 1.6, or _use_new_zipfile_serialization=False):
//   1. pickle: the magic number 0x1950a86a20f9469cfc6c
//   2. pickle: the protocol version (1001)
//   3. pickle: sys info (endianness, type sizes)
//   4. pickle: the object, storages as persistent ids ('storage', type, key, location, numel, view)
//   5. pickle: the sorted list of storage keys
//   then for each key in that order: int64 element count, then the storage's raw bytes.
#include <algorithm>

#include "verify/formats/torch_file.h"

namespace ckpt::verify {
namespace {

constexpr uint64_t kFirstWindow = 16ull << 20;
constexpr uint64_t kMaxPickles = 1ull << 30;

}  // namespace

Status read_legacy_pickles(TorchFile* tf) {
  const RandomAccessFile& f = *tf->file;
  const std::string& fn = f.path();
  // The pickles come first; read a window and widen it while they run past it.
  for (uint64_t window = std::min(kFirstWindow, f.size());;
       window = std::min(window * 4, f.size())) {
    CKPT_ASSIGN_OR_RETURN(std::string bytes, f.read_string(0, window));
    uint64_t off = 0;
    std::unique_ptr<PickleDoc> object, keys;
    Status st = Status::ok();
    for (int k = 0; k < 5 && st.is_ok(); ++k) {
      auto doc = read_pickle(bytes, fn + ": legacy pickle " + std::to_string(k + 1), {}, off);
      if (!doc.is_ok()) {
        st = doc.status();
        break;
      }
      off = (*doc)->end_offset;
      if (k == 0 && (*doc)->root->as_int() != std::nullopt) {
        return corrupt(fn + ": legacy torch.save magic number is not the expected long");
      }
      if (k == 3)
        object = std::move(doc).value();
      else if (k == 4)
        keys = std::move(doc).value();
    }
    if (!st.is_ok()) {
      if (window < f.size() && window < kMaxPickles) continue;  // may be cut by the window
      return st;
    }
    if (keys->root->kind != Kind::kList) {
      return corrupt(fn + ": legacy torch.save storage-key pickle is not a list");
    }
    for (const Value* k : keys->root->items) {
      if (k->kind != Kind::kStr) return corrupt(fn + ": legacy storage key is not a string");
      tf->legacy_keys.push_back(k->s);
    }
    tf->doc = std::move(object);
    tf->legacy_data_offset = off;
    return Status::ok();
  }
}

Status locate_legacy_records(TorchFile* tf) {
  const RandomAccessFile& f = *tf->file;
  uint64_t off = tf->legacy_data_offset;
  for (const std::string& key : tf->legacy_keys) {
    auto it = tf->storages.find(key);
    if (it == tf->storages.end()) {
      return corrupt(f.path() + ": legacy storage key \"" + key + "\" is not used by the object");
    }
    unsigned char n8[8];
    CKPT_RETURN_IF_ERROR(f.read_at(off, n8, 8));
    uint64_t numel = 0;
    for (int k = 0; k < 8; ++k) numel |= static_cast<uint64_t>(n8[k]) << (8 * k);
    const uint64_t es = it->second.element_size == 0 ? 1 : it->second.element_size;
    if (numel > f.size() / es || !range_inside(off + 8, numel * es, f.size())) {
      return corrupt(f.path() + ": legacy storage \"" + key + "\" (" + std::to_string(numel) +
                     " elements at offset " + std::to_string(off) + ") runs past the file");
    }
    tf->legacy_records[key] = {off + 8, numel * es};
    off += 8 + numel * es;
  }
  for (const auto& [key, t] : tf->storages) {
    if (tf->legacy_records.count(key) == 0) {
      return corrupt(f.path() + ": legacy storage \"" + key + "\" has no data after the pickles");
    }
  }
  return Status::ok();
}

}  // namespace ckpt::verify
