// Index version 2 (docs/format.md §8 "The INDEX file"): a 64-byte header; the head's directory
// (files, grids, tensors: varints, names front-coded); then one 16-byte record per box (file u32,
// page u32, XXH3-64). Records are placed so that what one restoring rank needs lies in few runs:
// for each grid (shape and cut descriptors) that tensors whose boxes are one per cell share, the
// records of cell 0 of every such tensor (in name order), then of cell 1, ...; after every grid,
// the boxes of each other tensor, in cell order. The header keeps the directory's XXH3 and the
// records' XXH3; the commit record keeps the head's (index_head_xxh3), so a rank that reads only
// the head and some records checks the head, and each record through the bytes it points to.
#include <algorithm>
#include <cstring>
#include <limits>
#include <map>
#include <unordered_map>
#include <unordered_set>

#include "ckpt/base/hash.h"
#include "ckpt/format/manifest.h"
#include "ckpt/store/box_index.h"
#include "ckpt/store/box_index_codec.h"

namespace ckpt::store {
namespace {

constexpr uint32_t kVersion = 2;
constexpr uint64_t kHeaderBytes = kIndexHeaderBytes;
constexpr uint8_t kLastDType = static_cast<uint8_t>(DType::kUInt64);
constexpr uint8_t kLastPlacement = static_cast<uint8_t>(Placement::kFlat);
constexpr uint64_t kBlockedBit = uint64_t{1} << 63;
// A head names at most this many files more than it has boxes (a rank whose shards are all
// empty still has a file), and at most 2^20 in all: the names are made when the head is read.
constexpr uint64_t kSpareFiles = 4096;
constexpr uint64_t kMaxFiles = uint64_t{1} << 20;

enum FileTable : uint8_t { kFilesNamed = 0, kFilesRanks = 1, kFilesFirstRanks = 2 };
enum CutKind : uint8_t { kCutStep = 0, kCutBlocked = 1, kCutList = 2 };
enum Layout : uint8_t { kListed = 1, kOwnDatasets = 2 };

uint32_t get32(const unsigned char* p) { return index_get32(p); }
uint64_t get64(const unsigned char* p) { return index_get64(p); }

void put32(std::string* out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out->push_back(static_cast<char>(v >> (8 * i)));
}
void put64(std::string* out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out->push_back(static_cast<char>(v >> (8 * i)));
}
void store32(char* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<char>(v >> (8 * i));
}
void store64(char* p, uint64_t v) {
  store32(p, static_cast<uint32_t>(v));
  store32(p + 4, static_cast<uint32_t>(v >> 32));
}
void put_varint(std::string* out, uint64_t v) {
  while (v >= 0x80) {
    out->push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out->push_back(static_cast<char>(v));
}
// `s` as the length of the prefix it shares with `prev`, then the rest, length first.
void put_front_coded(std::string* out, std::string_view prev, std::string_view s) {
  size_t k = 0;
  while (k < prev.size() && k < s.size() && prev[k] == s[k]) ++k;
  put_varint(out, k);
  put_varint(out, s.size() - k);
  out->append(s.substr(k));
}

// Reads the directory; the first thing past its end or malformed stops it, and every later read
// gives 0. error() says what and where.
class Reader {
 public:
  Reader(const unsigned char* p, uint64_t n) : p_(p), n_(n) {}
  bool ok() const { return error_.empty(); }
  const std::string& error() const { return error_; }
  uint64_t left() const { return n_ - at_; }

  uint8_t u8(const char* what) {
    if (!need(1, what)) return 0;
    return p_[at_++];
  }
  uint64_t varint(const char* what) {
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (!need(1, what)) return 0;
      const uint8_t b = p_[at_++];
      if (shift == 63 && b > 1) break;
      v |= uint64_t{b & 0x7fu} << shift;
      if ((b & 0x80) == 0) return v;
    }
    fail(std::string(what) + ": a varint longer than 64 bits");
    return 0;
  }
  std::string_view bytes(uint64_t n, const char* what) {
    if (!need(n, what)) return {};
    std::string_view s(reinterpret_cast<const char*>(p_ + at_), n);
    at_ += n;
    return s;
  }
  // A front-coded string after `prev` (put_front_coded).
  std::string front_coded(std::string_view prev, const char* what) {
    const uint64_t k = varint(what), n = varint(what);
    if (ok() && k > prev.size()) {
      fail(std::string(what) + ": shares " + std::to_string(k) + " bytes with a " +
           std::to_string(prev.size()) + "-byte string");
    }
    const std::string_view rest = bytes(n, what);
    if (!ok()) return {};
    std::string s(prev.substr(0, k));
    s.append(rest);
    return s;
  }
  void fail(const std::string& what) {
    if (error_.empty()) error_ = what + " (directory byte " + std::to_string(at_) + ")";
  }

 private:
  bool need(uint64_t n, const char* what) {
    if (!ok()) return false;
    if (n > n_ - at_) {
      fail(std::string(what) + " runs past the head");
      return false;
    }
    return true;
  }
  const unsigned char* p_;
  uint64_t n_, at_ = 0;
  std::string error_;
};

// "rank-00042.h5" -> 42, when the name is exactly what rank_file_name makes of a rank.
bool rank_of(std::string_view name, uint64_t* rank) {
  constexpr std::string_view kPrefix = "rank-", kSuffix = ".h5";
  if (name.size() <= kPrefix.size() + kSuffix.size() || name.substr(0, 5) != kPrefix ||
      name.substr(name.size() - 3) != kSuffix) {
    return false;
  }
  const std::string_view digits = name.substr(5, name.size() - 8);
  if (digits.size() > 15) return false;
  uint64_t r = 0;
  for (char c : digits) {
    if (c < '0' || c > '9') return false;
    r = r * 10 + static_cast<uint64_t>(c - '0');
  }
  if (rank_file_name(static_cast<int64_t>(r)) != name) return false;
  *rank = r;
  return true;
}

// Where each tensor's records go (positions in the record table), tensors given in name order:
// per grid, the tensors whose boxes are one per cell, interleaved cell by cell; then the others'
// boxes. `group`, `aligned`, `boxes` per tensor; returns the number of records.
uint64_t place_records(const std::vector<uint32_t>& group, const std::vector<bool>& aligned,
                       const std::vector<uint64_t>& boxes, size_t groups,
                       std::vector<uint64_t>* base, std::vector<uint64_t>* stride) {
  const size_t n = group.size();
  std::vector<uint64_t> members(groups, 0), cells(groups, 0), group_base(groups, 0);
  base->assign(n, 0);
  stride->assign(n, 1);
  for (size_t t = 0; t < n; ++t) {
    if (!aligned[t]) continue;
    (*base)[t] = members[group[t]]++;  // its place among the grid's tensors, for now
    cells[group[t]] = boxes[t];
  }
  uint64_t at = 0;
  for (size_t g = 0; g < groups; ++g) {
    group_base[g] = at;
    at += cells[g] * members[g];
  }
  for (size_t t = 0; t < n; ++t) {
    if (aligned[t]) {
      (*base)[t] += group_base[group[t]];
      (*stride)[t] = members[group[t]];
    } else {
      (*base)[t] = at;
      at += boxes[t];
    }
  }
  return at;
}

// The string table a decoded head builds: every distinct string once.
struct Interner {
  GlobalIndex* x;
  std::unordered_map<std::string, uint32_t> ids;
  std::string* strings;
  std::vector<uint32_t>* ends;

  uint32_t operator()(std::string_view s) {
    auto [it, fresh] = ids.try_emplace(std::string(s), static_cast<uint32_t>(ends->size()));
    if (fresh) {
      strings->append(s);
      ends->push_back(static_cast<uint32_t>(strings->size()));
    }
    return it->second;
  }
};

}  // namespace

std::string IndexV2Codec::encode(const GlobalIndex& x) {
  std::string dir;
  // Files: the ranks' own names when they are rank-R.h5 in increasing R.
  std::vector<uint64_t> ranks;
  for (uint32_t f = 0; f < x.files_.size(); ++f) {
    uint64_t r = 0;
    if (!rank_of(x.file_name(f), &r) || (!ranks.empty() && r <= ranks.back())) break;
    ranks.push_back(r);
  }
  if (ranks.size() == x.files_.size() && (ranks.empty() || ranks.back() == ranks.size() - 1)) {
    dir.push_back(static_cast<char>(kFilesFirstRanks));
  } else if (ranks.size() == x.files_.size()) {
    dir.push_back(static_cast<char>(kFilesRanks));
    for (size_t i = 0; i < ranks.size(); ++i) {
      put_varint(&dir, i == 0 ? ranks[0] : ranks[i] - ranks[i - 1] - 1);
    }
  } else {
    dir.push_back(static_cast<char>(kFilesNamed));
    std::string_view prev;
    for (uint32_t f = 0; f < x.files_.size(); ++f) {
      put_front_coded(&dir, prev, x.file_name(f));
      prev = x.file_name(f);
    }
  }

  // Grids, in the order the tensors (by name) first use them.
  const std::vector<uint32_t>& order = x.name_order_;
  std::map<std::vector<uint64_t>, uint32_t> grid_ids;
  std::vector<uint32_t> grid_of(order.size()), first_user;
  for (size_t i = 0; i < order.size(); ++i) {
    const IndexTensor& t = x.tensors_[order[i]];
    const auto w = x.geom_words_.begin() + t.geom;
    std::vector<uint64_t> key(w, w + static_cast<int64_t>(x.geometry_words(t)));
    key.insert(key.begin(), static_cast<uint64_t>(t.ndim));
    auto [it, fresh] =
        grid_ids.try_emplace(std::move(key), static_cast<uint32_t>(first_user.size()));
    if (fresh) first_user.push_back(order[i]);
    grid_of[i] = it->second;
  }
  for (uint32_t ti : first_user) {
    const IndexTensor& t = x.tensors_[ti];
    dir.push_back(static_cast<char>(t.ndim));
    for (int d = 0; d < t.ndim; ++d) put_varint(&dir, static_cast<uint64_t>(t.shape[d]));
    for (int d = 0; d < t.ndim; ++d) {
      if (t.block[d] > 0) {
        dir.push_back(static_cast<char>(kCutBlocked));
        put_varint(&dir, static_cast<uint64_t>(t.block[d]));
        put_varint(&dir, static_cast<uint64_t>(t.step[d]));
      } else if (t.step[d] > 0) {
        dir.push_back(static_cast<char>(kCutStep));
        put_varint(&dir, static_cast<uint64_t>(t.step[d]));
      } else {
        const uint64_t n = t.cells[d] > 0 ? t.cells[d] - 1 : 0;
        dir.push_back(static_cast<char>(kCutList));
        put_varint(&dir, n);
        uint64_t prev = 0;
        for (uint64_t i = 0; i < n; ++i) {
          const uint64_t c = x.geom_words_[t.cuts[d] + i];
          put_varint(&dir, c - prev);
          prev = c;
        }
      }
    }
  }

  // Tensors by name.
  std::vector<bool> aligned(order.size());
  std::vector<uint64_t> boxes(order.size());
  std::string_view prev_name;
  for (size_t i = 0; i < order.size(); ++i) {
    const IndexTensor& t = x.tensors_[order[i]];
    const std::string_view name = x.string(t.name);
    bool own_datasets = false;
    for (uint32_t b = t.first_box; b < t.first_box + t.box_count && !own_datasets; ++b) {
      own_datasets = x.string(x.boxes_[b].dataset) != name;
    }
    aligned[i] = t.cell_aligned;
    boxes[i] = t.box_count;
    put_front_coded(&dir, prev_name, name);
    prev_name = name;
    dir.push_back(static_cast<char>(t.dtype));
    dir.push_back(static_cast<char>(t.placement));
    put_varint(&dir, grid_of[i]);
    dir.push_back(
        static_cast<char>((t.cell_aligned ? 0 : kListed) | (own_datasets ? kOwnDatasets : 0)));
    if (!t.cell_aligned) {
      put_varint(&dir, t.box_count);
      uint32_t prev_first = 0;
      for (uint32_t b = t.first_box; b < t.first_box + t.box_count; ++b) {
        const BoxRecord& r = x.boxes_[b];
        put_varint(&dir, r.first_cell - prev_first);
        put_varint(&dir, r.last_cell - r.first_cell);
        prev_first = r.first_cell;
      }
    }
    if (own_datasets) {
      for (uint32_t b = t.first_box; b < t.first_box + t.box_count; ++b) {
        const std::string_view ds = x.string(x.boxes_[b].dataset);
        put_varint(&dir, ds.size());
        dir.append(ds);
      }
    }
  }

  // Records where place_records puts them.
  std::vector<uint64_t> base, stride;
  const uint64_t n_records =
      place_records(grid_of, aligned, boxes, first_user.size(), &base, &stride);
  std::string records(n_records * kIndexRecordBytes, '\0');
  for (size_t i = 0; i < order.size(); ++i) {
    const IndexTensor& t = x.tensors_[order[i]];
    for (uint32_t j = 0; j < t.box_count; ++j) {
      const BoxRecord& r = x.boxes_[t.first_box + j];
      char* at = &records[(base[i] + j * stride[i]) * kIndexRecordBytes];
      store32(at, r.file);
      store32(at + 4, r.page);
      store64(at + 8, r.xxh3);
    }
  }

  std::string out(kIndexMagic, sizeof(kIndexMagic));
  put32(&out, kVersion);
  put32(&out, static_cast<uint32_t>(kHeaderBytes));
  put32(&out, static_cast<uint32_t>(x.tensors_.size()));
  put32(&out, static_cast<uint32_t>(n_records));
  put32(&out, static_cast<uint32_t>(x.files_.size()));
  put32(&out, static_cast<uint32_t>(first_user.size()));
  put64(&out, kHeaderBytes + dir.size());
  put64(&out, static_cast<uint64_t>(x.step));
  put64(&out, xxh3_64(records.data(), records.size()));
  put64(&out, xxh3_64(dir.data(), dir.size()));
  out += dir;
  out += records;
  return out;
}

namespace {

// The head's size from a version-2 header: magic, version and header size checked.
Result<uint64_t> parse_header(const std::string& header, const std::string& where) {
  CKPT_ASSIGN_OR_RETURN(const uint32_t version, index_version(header, where));
  const auto* p = reinterpret_cast<const unsigned char*>(header.data());
  if (version != kVersion) {
    return unsupported(where + ": box index version " + std::to_string(version) +
                       " has no head to read alone");
  }
  if (get32(p + 12) != kHeaderBytes) {
    return corrupt(where + ": header size " + std::to_string(get32(p + 12)) + " (expected 64)");
  }
  const uint64_t head = get64(p + 32);
  if (head < kHeaderBytes) {
    return corrupt(where + ": the header gives a " + std::to_string(head) +
                   "-byte head, shorter than itself");
  }
  return head;
}

}  // namespace

Result<uint64_t> IndexV2Codec::head_bytes(const std::string& header, uint64_t file_bytes,
                                          const std::string& where) {
  CKPT_ASSIGN_OR_RETURN(const uint64_t head, parse_header(header, where));
  const uint64_t boxes = get32(reinterpret_cast<const unsigned char*>(header.data()) + 20);
  if (head > file_bytes || (file_bytes - head) / kIndexRecordBytes != boxes ||
      (file_bytes - head) % kIndexRecordBytes != 0) {
    return corrupt(where + ": the header gives a " + std::to_string(head) + "-byte head and " +
                   std::to_string(boxes) + " 16-byte box records, not the file's " +
                   std::to_string(file_bytes) + " bytes");
  }
  return head;
}

Result<GlobalIndex> IndexV2Codec::decode_head(const std::string& bytes, const std::string& where) {
  CKPT_ASSIGN_OR_RETURN(const uint64_t head, parse_header(bytes, where));
  const auto* p = reinterpret_cast<const unsigned char*>(bytes.data());
  if (head != bytes.size()) {
    return corrupt(where + ": the header gives a " + std::to_string(head) + "-byte head, " +
                   std::to_string(bytes.size()) + " bytes were read");
  }
  auto bad = [&](const std::string& what) { return corrupt(where + ": " + what); };
  const uint64_t want = get64(p + 56), got = xxh3_64(p + kHeaderBytes, head - kHeaderBytes);
  if (want != got) {
    return bad("directory hash mismatch (header says " + hex64(want) + ", bytes hash to " +
               hex64(got) + ")");
  }
  const uint64_t n_tensors = get32(p + 16), n_boxes = get32(p + 20), n_files = get32(p + 24),
                 n_grids = get32(p + 28);
  GlobalIndex x;
  x.version_ = 2;
  x.partial_ = true;
  x.box_total_ = n_boxes;
  x.head_bytes_ = head;
  x.step = static_cast<int64_t>(get64(p + 40));
  Interner intern{&x, {}, &x.strings_, &x.string_ends_};
  Reader r(p + kHeaderBytes, head - kHeaderBytes);

  // Files.
  if (n_files > n_boxes + kSpareFiles || n_files > kMaxFiles) {
    return bad("the header names " + std::to_string(n_files) + " files for " +
               std::to_string(n_boxes) + " boxes");
  }
  const uint8_t table = r.u8("the file table");
  std::unordered_set<std::string> file_names;
  std::string prev_file;
  uint64_t rank = 0;
  for (uint64_t f = 0; f < n_files && r.ok(); ++f) {
    std::string name;
    if (table == kFilesFirstRanks) {
      name = rank_file_name(static_cast<int64_t>(f));
    } else if (table == kFilesRanks) {
      const uint64_t step = r.varint("a file's rank");
      if (f > 0 && step > (uint64_t{1} << 40) - rank - 1) return bad("a file's rank passes 2^40");
      rank = f == 0 ? step : rank + step + 1;
      if (rank >= uint64_t{1} << 40) return bad("a file's rank passes 2^40");
      name = rank_file_name(static_cast<int64_t>(rank));
    } else if (table == kFilesNamed) {
      name = r.front_coded(prev_file, "a file's name");
      prev_file = name;
    } else {
      return bad("unknown file table kind " + std::to_string(table));
    }
    if (!r.ok()) break;
    if (table == kFilesNamed && !file_names.insert(name).second) {
      return bad("file \"" + name + "\" is listed twice");
    }
    x.files_.push_back(intern(name));
  }

  // Grids: written into geom_words_ as version 1 keeps them, one copy each.
  if (n_grids > n_tensors) {
    return bad(std::to_string(n_grids) + " grids for " + std::to_string(n_tensors) + " tensors");
  }
  std::vector<std::pair<uint32_t, int>> grids;  // geometry word, ndim
  for (uint64_t g = 0; g < n_grids && r.ok(); ++g) {
    const int ndim = r.u8("a grid's rank");
    if (ndim > kMaxBoxDims) {
      return bad("grid " + std::to_string(g) + " has " + std::to_string(ndim) +
                 " dimensions (at most " + std::to_string(kMaxBoxDims) + ")");
    }
    grids.emplace_back(static_cast<uint32_t>(x.geom_words_.size()), ndim);
    for (int d = 0; d < ndim; ++d) x.geom_words_.push_back(r.varint("a grid's extent"));
    for (int d = 0; d < ndim && r.ok(); ++d) {
      const uint8_t kind = r.u8("a cut descriptor");
      if (kind == kCutStep || kind == kCutBlocked) {
        const uint64_t a = r.varint("a cut step");
        if (a == 0 || (a & kBlockedBit) != 0) {
          return bad("grid " + std::to_string(g) + " dimension " + std::to_string(d) + ": step " +
                     std::to_string(a) + " is 0 or past 2^63");
        }
        x.geom_words_.push_back(kind == kCutBlocked ? (kBlockedBit | a) : a);
        if (kind == kCutBlocked) x.geom_words_.push_back(r.varint("a block's step"));
      } else if (kind == kCutList) {
        const uint64_t n = r.varint("a cut count");
        if (n > r.left()) return bad("grid " + std::to_string(g) + ": more cuts than bytes left");
        x.geom_words_.push_back(0);
        x.geom_words_.push_back(n);
        uint64_t at = 0;
        for (uint64_t i = 0; i < n && r.ok(); ++i) {
          const uint64_t delta = r.varint("a cut");
          if (delta > std::numeric_limits<uint64_t>::max() - at) return bad("a cut passes 2^64");
          at += delta;
          x.geom_words_.push_back(at);
        }
      } else {
        return bad("grid " + std::to_string(g) + ": unknown cut kind " + std::to_string(kind));
      }
    }
  }
  if (!r.ok()) return bad(r.error());

  // Tensors, by name; their boxes' cells where they are not one per cell.
  if (n_tensors > r.left() / 6) {
    return bad("the header promises " + std::to_string(n_tensors) + " tensors, more than the " +
               std::to_string(r.left()) + " bytes left in the head hold");
  }
  std::vector<uint32_t> grid_of;
  std::vector<bool> aligned;
  std::vector<uint64_t> boxes;
  std::string prev_name;
  uint64_t next_box = 0;
  for (uint64_t i = 0; i < n_tensors; ++i) {
    std::string name = r.front_coded(prev_name, "a tensor's name");
    const uint8_t dtype = r.u8("a tensor's dtype"), placement = r.u8("a tensor's placement");
    const uint64_t grid = r.varint("a tensor's grid");
    const uint8_t layout = r.u8("a tensor's layout");
    if (!r.ok()) return bad(r.error());
    const std::string who = "tensor \"" + name + "\": ";
    if (i > 0 && !(prev_name < name)) {
      return bad(who + (prev_name == name ? "listed twice" : "out of name order"));
    }
    if (dtype > kLastDType) return bad(who + "unknown dtype code " + std::to_string(dtype));
    if (placement > kLastPlacement) {
      return bad(who + "unknown placement code " + std::to_string(placement));
    }
    if (grid >= grids.size()) {
      return bad(who + "grid " + std::to_string(grid) + " of " + std::to_string(grids.size()));
    }
    if ((layout & ~(kListed | kOwnDatasets)) != 0) {
      return bad(who + "unknown layout bits " + std::to_string(layout));
    }
    IndexTensor t;
    t.name = intern(name);
    t.dtype = static_cast<DType>(dtype);
    t.placement = static_cast<Placement>(placement);
    t.geom = grids[grid].first;
    t.ndim = grids[grid].second;
    CKPT_RETURN_IF_ERROR(x.finish_tensor(&t, where + ": " + who));
    t.first_box = static_cast<uint32_t>(next_box);
    t.cell_aligned = (layout & kListed) == 0;
    if (t.cell_aligned) {
      t.box_count = static_cast<uint32_t>(t.total_cells);
      if (t.total_cells > n_boxes - next_box) {
        return bad(who + "its " + std::to_string(t.total_cells) +
                   " cells pass the header's box count " + std::to_string(n_boxes));
      }
    } else {
      const uint64_t n = r.varint("a tensor's box count");
      if (n > n_boxes - next_box || n > r.left() / 2) {
        return bad(who + std::to_string(n) + " boxes pass the header's box count or the head");
      }
      t.box_count = static_cast<uint32_t>(n);
      t.cells_at = static_cast<uint32_t>(x.listed_cells_.size());
      uint64_t first = 0, last = 0;
      for (uint64_t b = 0; b < n && r.ok(); ++b) {
        const uint64_t df = r.varint("a box's first cell"), span = r.varint("a box's cells");
        const uint64_t prev_last = last;
        if (df >= t.total_cells - first || span >= t.total_cells - first - df) {
          if (!r.ok()) break;
          return bad(who + "box " + std::to_string(b) + " is outside the tensor's " +
                     std::to_string(t.total_cells) + " cells");
        }
        first += df;
        last = first + span;
        if (b > 0 && df == 0 && last < prev_last) {
          return bad(who + "box " + std::to_string(b) + ": out of cell order");
        }
        for (int d = 0; d < t.ndim; ++d) {
          if ((first / t.cell_stride[d]) % t.cells[d] > (last / t.cell_stride[d]) % t.cells[d]) {
            return bad(who + "box " + std::to_string(b) + ": its first cell " +
                       std::to_string(first) + " is past its last cell " + std::to_string(last) +
                       " along dimension " + std::to_string(d));
          }
        }
        x.listed_cells_.emplace_back(static_cast<uint32_t>(first), static_cast<uint32_t>(last));
      }
    }
    if (layout & kOwnDatasets) {
      if (t.box_count > r.left()) return bad(who + "more datasets than bytes left");
      t.datasets_at = static_cast<uint32_t>(x.box_datasets_.size());
      for (uint32_t b = 0; b < t.box_count && r.ok(); ++b) {
        const std::string_view ds = r.bytes(r.varint("a dataset's length"), "a dataset's path");
        x.box_datasets_.push_back(intern(ds));
      }
    }
    if (!r.ok()) return bad(r.error());
    next_box += t.box_count;
    grid_of.push_back(static_cast<uint32_t>(grid));
    aligned.push_back(t.cell_aligned);
    boxes.push_back(t.box_count);
    x.tensors_.push_back(t);
    prev_name = std::move(name);
  }
  if (next_box != n_boxes) {
    return bad("the tensors hold " + std::to_string(next_box) + " boxes, the header says " +
               std::to_string(n_boxes));
  }
  if (r.left() != 0) return bad(std::to_string(r.left()) + " trailing bytes in the head");
  std::vector<uint64_t> base, stride;
  place_records(grid_of, aligned, boxes, grids.size(), &base, &stride);
  for (size_t i = 0; i < x.tensors_.size(); ++i) {
    x.tensors_[i].record_base = static_cast<uint32_t>(base[i]);
    x.tensors_[i].record_stride = static_cast<uint32_t>(stride[i]);
    x.scan_boxes(&x.tensors_[i]);
  }
  x.sort_names();
  return x;
}

Result<GlobalIndex> IndexV2Codec::decode(const std::string& bytes, const std::string& where) {
  const auto* p = reinterpret_cast<const unsigned char*>(bytes.data());
  CKPT_ASSIGN_OR_RETURN(const uint64_t head, head_bytes(bytes, bytes.size(), where));
  const uint64_t want = get64(p + 48), got = xxh3_64(p + head, bytes.size() - head);
  if (want != got) {
    return corrupt(where + ": box records hash mismatch (header says " + hex64(want) +
                   ", bytes hash to " + hex64(got) + ")");
  }
  CKPT_ASSIGN_OR_RETURN(GlobalIndex x, decode_head(bytes.substr(0, head), where));
  // Every record, in box order (box b at boxes_[b]): the partial index becomes a whole one.
  x.boxes_.reserve(x.box_total_);
  for (size_t ti = 0; ti < x.tensors_.size(); ++ti) {
    const IndexTensor& t = x.tensors_[ti];
    for (uint32_t b = t.first_box; b < t.first_box + t.box_count; ++b) {
      CKPT_ASSIGN_OR_RETURN(BoxRecord r, x.parse_record(ti, b, p + x.record_offset(t, b), where));
      x.boxes_.push_back(r);
    }
  }
  x.partial_ = false;
  x.listed_cells_.clear();
  x.listed_cells_.shrink_to_fit();
  CKPT_RETURN_IF_ERROR(x.check_byte_overlaps(where));
  for (IndexTensor& t : x.tensors_) x.scan_boxes(&t);
  return x;
}

uint64_t IndexV2Codec::head_size(const GlobalIndex& x) {
  const std::string bytes = encode(x);
  return get64(reinterpret_cast<const unsigned char*>(bytes.data()) + 32);
}

uint64_t GlobalIndex::encoded_bytes() const { return IndexV2Codec::encode(*this).size(); }
uint64_t GlobalIndex::directory_bytes() const { return IndexV2Codec::head_size(*this); }

Result<uint64_t> index_head_bytes(const std::string& header, uint64_t file_bytes,
                                  const std::string& where) {
  return IndexV2Codec::head_bytes(header, file_bytes, where);
}

Result<GlobalIndex> decode_index_head(const std::string& head, const std::string& where) {
  return IndexV2Codec::decode_head(head, where);
}

uint64_t index_head_xxh3(const std::string& encoded) {
  const auto* p = reinterpret_cast<const unsigned char*>(encoded.data());
  const uint64_t head = std::min<uint64_t>(get64(p + 32), encoded.size());
  return xxh3_64(encoded.data(), head);
}

}  // namespace ckpt::store
