// Index version 1 (docs/format.md "Version 2: boxes and the index", "Index version 1"): what
// checkpoints written before index version 2 hold, read whole. Every integer is little-endian;
// sections follow the 64-byte header in this order: tensors (24 B each), boxes (28 B each),
// geometry words (8 B), files (4 B), string ends (4 B), string bytes. The header's body hash
// covers everything after the header. decode_index dispatches on the version here.
#include "ckpt/store/box_index_codec.h"

#include <algorithm>
#include <cstring>
#include <limits>

#include "ckpt/base/hash.h"
#include "ckpt/store/box_index.h"

namespace ckpt::store {
namespace {

constexpr uint32_t kIndexVersion = 1;
constexpr uint64_t kHeaderBytes = kIndexHeaderBytes;
constexpr uint64_t kTensorBytes = 24;
constexpr uint64_t kBoxBytes = 28;
constexpr uint8_t kLastDType = static_cast<uint8_t>(DType::kUInt64);
constexpr uint8_t kLastPlacement = static_cast<uint8_t>(Placement::kFlat);

class Writer {
 public:
  explicit Writer(std::string* out) : out_(out) {}
  void u8(uint8_t v) { out_->push_back(static_cast<char>(v)); }
  void u32(uint32_t v) {
    for (int i = 0; i < 4; ++i) u8(static_cast<uint8_t>(v >> (8 * i)));
  }
  void u64(uint64_t v) {
    for (int i = 0; i < 8; ++i) u8(static_cast<uint8_t>(v >> (8 * i)));
  }

 private:
  std::string* out_;
};

uint32_t get32(const unsigned char* p) { return index_get32(p); }
uint64_t get64(const unsigned char* p) { return index_get64(p); }

}  // namespace

std::string IndexV1Codec::encode(const GlobalIndex& x) {
  std::string out;
  out.append(kIndexMagic, sizeof(kIndexMagic));
  Writer w(&out);
  w.u32(kIndexVersion);
  w.u32(static_cast<uint32_t>(kHeaderBytes));
  w.u32(static_cast<uint32_t>(x.tensors_.size()));
  w.u32(static_cast<uint32_t>(x.boxes_.size()));
  w.u32(static_cast<uint32_t>(x.files_.size()));
  w.u32(static_cast<uint32_t>(x.string_ends_.size()));
  w.u32(static_cast<uint32_t>(x.geom_words_.size()));
  w.u32(0);
  w.u64(x.strings_.size());
  w.u64(static_cast<uint64_t>(x.step));
  w.u64(0);  // body hash, filled in below
  for (const IndexTensor& t : x.tensors_) {
    w.u32(t.name);
    w.u32(t.first_box);
    w.u32(t.box_count);
    w.u32(t.geom);
    w.u8(static_cast<uint8_t>(t.dtype));
    w.u8(static_cast<uint8_t>(t.placement));
    w.u8(static_cast<uint8_t>(t.ndim));
    w.u8(0);
    w.u32(0);
  }
  for (const BoxRecord& r : x.boxes_) {
    w.u32(r.file);
    w.u32(r.dataset);
    w.u32(r.page);
    w.u32(r.first_cell);
    w.u32(r.last_cell);
    w.u64(r.xxh3);
  }
  for (uint64_t g : x.geom_words_) w.u64(g);
  for (uint32_t f : x.files_) w.u32(f);
  for (uint32_t e : x.string_ends_) w.u32(e);
  out += x.strings_;
  const uint64_t h = xxh3_64(out.data() + kHeaderBytes, out.size() - kHeaderBytes);
  std::string hash;
  Writer(&hash).u64(h);
  out.replace(56, 8, hash);
  return out;
}

Result<GlobalIndex> IndexV1Codec::decode(const std::string& bytes, const std::string& where) {
  const auto* p = reinterpret_cast<const unsigned char*>(bytes.data());
  const uint64_t size = bytes.size();
  auto bad = [&](const std::string& what) { return corrupt(where + ": " + what); };
  if (get32(p + 12) != kHeaderBytes) {
    return bad("header size " + std::to_string(get32(p + 12)) + " (expected 64)");
  }
  if (get32(p + 36) != 0) return bad("reserved header word is not zero");
  const uint64_t n_tensors = get32(p + 16), n_boxes = get32(p + 20), n_files = get32(p + 24),
                 n_strings = get32(p + 28), n_words = get32(p + 32);
  const uint64_t string_bytes = get64(p + 40);
  const uint64_t fixed = kHeaderBytes + n_tensors * kTensorBytes + n_boxes * kBoxBytes +
                         n_words * 8 + n_files * 4 + n_strings * 4;
  if (string_bytes > size || fixed > size - string_bytes) {
    return bad("truncated: the header promises " + std::to_string(n_tensors) + " tensors, " +
               std::to_string(n_boxes) + " boxes and " + std::to_string(string_bytes) +
               " string bytes, more than the file's " + std::to_string(size) + " bytes");
  }
  if (fixed + string_bytes != size) {
    return bad(std::to_string(size - fixed - string_bytes) +
               " trailing bytes after the string table");
  }
  const uint64_t want_hash = get64(p + 56);
  const uint64_t got_hash = xxh3_64(p + kHeaderBytes, size - kHeaderBytes);
  if (want_hash != got_hash) {
    return bad("body hash mismatch (header says " + hex64(want_hash) + ", bytes hash to " +
               hex64(got_hash) + ")");
  }

  GlobalIndex x;
  x.version_ = 1;
  x.box_total_ = n_boxes;
  x.step = static_cast<int64_t>(get64(p + 48));
  const unsigned char* q = p + kHeaderBytes;
  const unsigned char* tensors_at = q;
  q += n_tensors * kTensorBytes;
  const unsigned char* boxes_at = q;
  q += n_boxes * kBoxBytes;
  x.geom_words_.resize(n_words);
  for (uint64_t i = 0; i < n_words; ++i, q += 8) x.geom_words_[i] = get64(q);
  x.files_.resize(n_files);
  for (uint64_t i = 0; i < n_files; ++i, q += 4) x.files_[i] = get32(q);
  x.string_ends_.resize(n_strings);
  uint64_t prev_end = 0;
  for (uint64_t i = 0; i < n_strings; ++i, q += 4) {
    x.string_ends_[i] = get32(q);
    if (x.string_ends_[i] < prev_end || x.string_ends_[i] > string_bytes) {
      return bad("string " + std::to_string(i) + " ends at " + std::to_string(x.string_ends_[i]) +
                 ", outside [" + std::to_string(prev_end) + ", " + std::to_string(string_bytes) +
                 "]");
    }
    prev_end = x.string_ends_[i];
  }
  if (prev_end != string_bytes) {
    return bad("the strings end at " + std::to_string(prev_end) + " but the string table holds " +
               std::to_string(string_bytes) + " bytes");
  }
  x.strings_.assign(reinterpret_cast<const char*>(q), string_bytes);

  // Files: known strings, distinct names.
  for (uint64_t i = 0; i < n_files; ++i) {
    if (x.files_[i] >= n_strings) {
      return bad("file " + std::to_string(i) + " names string " + std::to_string(x.files_[i]) +
                 " of " + std::to_string(n_strings));
    }
  }
  {
    std::vector<std::string_view> names;
    names.reserve(n_files);
    for (uint32_t f : x.files_) names.push_back(x.string(f));
    std::sort(names.begin(), names.end());
    auto dup = std::adjacent_find(names.begin(), names.end());
    if (dup != names.end()) return bad("file \"" + std::string(*dup) + "\" is listed twice");
  }

  // Tensors: their box ranges partition the box table in order.
  x.tensors_.resize(n_tensors);
  uint64_t next_box = 0;
  for (uint64_t i = 0; i < n_tensors; ++i) {
    const unsigned char* r = tensors_at + i * kTensorBytes;
    IndexTensor& t = x.tensors_[i];
    t.name = get32(r);
    std::string who = "tensor " + std::to_string(i) + ": ";
    if (t.name >= n_strings) {
      return bad(who + "name is string " + std::to_string(t.name) + " of " +
                 std::to_string(n_strings));
    }
    who = "tensor \"" + std::string(x.string(t.name)) + "\": ";
    t.first_box = get32(r + 4);
    t.box_count = get32(r + 8);
    t.geom = get32(r + 12);
    if (r[16] > kLastDType) return bad(who + "unknown dtype code " + std::to_string(r[16]));
    if (r[17] > kLastPlacement) return bad(who + "unknown placement code " + std::to_string(r[17]));
    t.dtype = static_cast<DType>(r[16]);
    t.placement = static_cast<Placement>(r[17]);
    t.ndim = r[18];
    if (r[19] != 0 || get32(r + 20) != 0) return bad(who + "reserved bytes are not zero");
    if (t.first_box != next_box || t.box_count > n_boxes - next_box) {
      return bad(who + "boxes [" + std::to_string(t.first_box) + ", +" +
                 std::to_string(t.box_count) + ") do not follow the previous tensor's (next is " +
                 std::to_string(next_box) + " of " + std::to_string(n_boxes) + ")");
    }
    next_box += t.box_count;
    CKPT_RETURN_IF_ERROR(x.finish_tensor(&t, where + ": " + who));
  }
  if (next_box != n_boxes) {
    return bad(std::to_string(n_boxes - next_box) + " boxes belong to no tensor");
  }
  x.sort_names();
  for (size_t i = 1; i < x.name_order_.size(); ++i) {
    if (x.tensor_name(x.name_order_[i]) == x.tensor_name(x.name_order_[i - 1])) {
      return bad("tensor \"" + std::string(x.tensor_name(x.name_order_[i])) + "\" is listed twice");
    }
  }

  // Boxes: known ids, inside the grid, first corner before last, in cell order.
  x.boxes_.resize(n_boxes);
  for (uint64_t ti = 0; ti < n_tensors; ++ti) {
    const IndexTensor& t = x.tensors_[ti];
    for (uint64_t b = t.first_box; b < uint64_t{t.first_box} + t.box_count; ++b) {
      const unsigned char* r = boxes_at + b * kBoxBytes;
      BoxRecord& rec = x.boxes_[b];
      rec.file = get32(r);
      rec.dataset = get32(r + 4);
      rec.page = get32(r + 8);
      rec.first_cell = get32(r + 12);
      rec.last_cell = get32(r + 16);
      rec.xxh3 = get64(r + 20);
      CKPT_RETURN_IF_ERROR(x.check_box(t, b, rec, where));
      if (b > t.first_box) {
        const BoxRecord& before = x.boxes_[b - 1];
        if (rec.first_cell < before.first_cell ||
            (rec.first_cell == before.first_cell && rec.last_cell < before.last_cell)) {
          return bad("tensor \"" + std::string(x.string(t.name)) + "\": box " +
                     std::to_string(b - t.first_box) + ": out of cell order (first cell " +
                     std::to_string(rec.first_cell) + " after " +
                     std::to_string(before.first_cell) + ")");
        }
      }
    }
  }
  CKPT_RETURN_IF_ERROR(x.check_byte_overlaps(where));
  for (IndexTensor& t : x.tensors_) x.scan_boxes(&t);
  return x;
}

std::string encode_index(const GlobalIndex& index, int version) {
  return version == 1 ? IndexV1Codec::encode(index) : IndexV2Codec::encode(index);
}

Result<uint32_t> index_version(const std::string& bytes, const std::string& where) {
  if (bytes.size() < kHeaderBytes) {
    return corrupt(where + ": truncated: " + std::to_string(bytes.size()) +
                   " bytes, less than the 64-byte header");
  }
  const auto* p = reinterpret_cast<const unsigned char*>(bytes.data());
  if (std::memcmp(p, kIndexMagic, sizeof(kIndexMagic)) != 0) {
    return corrupt(where + ": not a ckpt box index (magic is not \"CKPTINDX\")");
  }
  return get32(p + 8);
}

Result<GlobalIndex> decode_index(const std::string& bytes, const std::string& where) {
  CKPT_ASSIGN_OR_RETURN(const uint32_t version, index_version(bytes, where));
  if (version == 1) return IndexV1Codec::decode(bytes, where);
  if (version == 2) return IndexV2Codec::decode(bytes, where);
  return unsupported(where + ": box index version " + std::to_string(version) +
                     " (this ckpt reads versions 1 and 2)");
}

}  // namespace ckpt::store
