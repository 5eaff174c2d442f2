#include "ckpt/store/box_index.h"

#include <algorithm>
#include <limits>

namespace ckpt::store {
namespace {

constexpr uint64_t kMaxCells = uint64_t{1} << 32;  // first/last cell are 32-bit
constexpr uint64_t kMaxTensorBytes = uint64_t{1} << 62;
constexpr uint64_t kBlockedBit = uint64_t{1} << 63;  // a cut descriptor (B | bit, s): blocked

// a * b, or false when it passes `limit`.
bool mul_within(uint64_t a, uint64_t b, uint64_t limit, uint64_t* out) {
  if (a != 0 && b > limit / a) return false;
  *out = a * b;
  return *out <= limit;
}

bool record_less(const BoxRecord& a, const BoxRecord& b) {
  if (a.first_cell != b.first_cell) return a.first_cell < b.first_cell;
  if (a.last_cell != b.last_cell) return a.last_cell < b.last_cell;
  if (a.file != b.file) return a.file < b.file;
  return a.page < b.page;
}

}  // namespace

const char* placement_name(Placement p) {
  switch (p) {
    case Placement::kWhole:
      return "whole";
    case Placement::kReplicated:
      return "replicated";
    case Placement::kSharded:
      return "sharded";
    case Placement::kFlat:
      return "flat";
  }
  return "?";
}

uint64_t Extent::numel() const {
  uint64_t n = 1;
  for (int d = 0; d < ndim; ++d) n *= static_cast<uint64_t>(sizes[d]);
  return n;
}

bool Extent::empty() const {
  for (int d = 0; d < ndim; ++d) {
    if (sizes[d] == 0) return true;
  }
  return false;
}

Extent make_extent(const std::vector<int64_t>& offsets, const std::vector<int64_t>& sizes) {
  Extent e;
  e.ndim = static_cast<int>(std::min<size_t>(std::min(offsets.size(), sizes.size()), kMaxBoxDims));
  for (int d = 0; d < e.ndim; ++d) {
    e.offsets[d] = offsets[d];
    e.sizes[d] = sizes[d];
  }
  return e;
}

bool operator==(const Extent& a, const Extent& b) {
  if (a.ndim != b.ndim) return false;
  for (int d = 0; d < a.ndim; ++d) {
    if (a.offsets[d] != b.offsets[d] || a.sizes[d] != b.sizes[d]) return false;
  }
  return true;
}

std::string extent_string(const Extent& e) {
  std::string s = "[";
  for (int d = 0; d < e.ndim; ++d) {
    if (d > 0) s += ", ";
    s += std::to_string(e.offsets[d]) + ":" + std::to_string(e.offsets[d] + e.sizes[d]);
  }
  return s + "]";
}

// --- GlobalIndex ---------------------------------------------------------------------------------

std::string_view GlobalIndex::string(uint32_t id) const {
  const uint32_t begin = id == 0 ? 0 : string_ends_[id - 1];
  return std::string_view(strings_).substr(begin, string_ends_[id] - begin);
}

int64_t GlobalIndex::find_tensor(std::string_view name) const {
  auto it = std::lower_bound(name_order_.begin(), name_order_.end(), name,
                             [&](uint32_t t, std::string_view n) { return tensor_name(t) < n; });
  if (it == name_order_.end() || tensor_name(*it) != name) return -1;
  return *it;
}

int64_t GlobalIndex::cell_begin(const IndexTensor& t, int d, uint64_t c) const {
  if (c == 0) return 0;
  if (t.block[d] > 0) {
    const uint64_t blk = c / t.block_cells[d], j = c % t.block_cells[d];
    return static_cast<int64_t>(blk * static_cast<uint64_t>(t.block[d]) +
                                j * static_cast<uint64_t>(t.step[d]));
  }
  if (t.step[d] > 0) return static_cast<int64_t>(c) * t.step[d];
  return static_cast<int64_t>(geom_words_[t.cuts[d] + c - 1]);
}

int64_t GlobalIndex::cell_end(const IndexTensor& t, int d, uint64_t c) const {
  if (c + 1 >= t.cells[d]) return t.shape[d];
  if (t.block[d] > 0) return cell_begin(t, d, c + 1);
  if (t.step[d] > 0) return static_cast<int64_t>(c + 1) * t.step[d];
  return static_cast<int64_t>(geom_words_[t.cuts[d] + c]);
}

uint64_t GlobalIndex::cell_of(const IndexTensor& t, int d, int64_t x) const {
  if (t.block[d] > 0) {
    const uint64_t blk = static_cast<uint64_t>(x / t.block[d]);
    const uint64_t j = static_cast<uint64_t>((x % t.block[d]) / t.step[d]);
    return blk * t.block_cells[d] + j;
  }
  if (t.step[d] > 0) return static_cast<uint64_t>(x / t.step[d]);
  const auto first = geom_words_.begin() + t.cuts[d];
  const auto last = first + static_cast<int64_t>(t.cells[d] - 1);
  return static_cast<uint64_t>(std::upper_bound(first, last, static_cast<uint64_t>(x)) - first);
}

std::pair<uint32_t, uint32_t> GlobalIndex::box_cells(const IndexTensor& t, size_t b) const {
  if (!partial_) return {boxes_[b].first_cell, boxes_[b].last_cell};
  const uint32_t i = static_cast<uint32_t>(b - t.first_box);
  if (t.cell_aligned) return {i, i};
  return listed_cells_[t.cells_at + i];
}

uint64_t GlobalIndex::record_offset(const IndexTensor& t, size_t b) const {
  const uint64_t i = b - t.first_box;
  return head_bytes_ + (t.record_base + i * t.record_stride) * kIndexRecordBytes;
}

Result<BoxRecord> GlobalIndex::parse_record(size_t ti, size_t b, const unsigned char* p,
                                            const std::string& where) const {
  const IndexTensor& t = tensors_[ti];
  BoxRecord r;
  r.file = uint32_t{p[0]} | uint32_t{p[1]} << 8 | uint32_t{p[2]} << 16 | uint32_t{p[3]} << 24;
  r.page = uint32_t{p[4]} | uint32_t{p[5]} << 8 | uint32_t{p[6]} << 16 | uint32_t{p[7]} << 24;
  r.xxh3 = 0;
  for (int i = 7; i >= 0; --i) r.xxh3 = r.xxh3 << 8 | p[8 + i];
  std::tie(r.first_cell, r.last_cell) = box_cells(t, b);
  r.dataset =
      t.datasets_at == kNoDatasets ? t.name : box_datasets_[t.datasets_at + (b - t.first_box)];
  CKPT_RETURN_IF_ERROR(check_box(t, b, r, where));
  return r;
}

Status GlobalIndex::load_record(size_t ti, size_t b, const unsigned char* p,
                                const std::string& where) {
  const IndexTensor& t = tensors_[ti];
  if (!partial_ || b < t.first_box || b - t.first_box >= t.box_count) {
    return invalid_argument(where + ": load_record: box " + std::to_string(b) +
                            " is not a box of tensor \"" + std::string(tensor_name(ti)) +
                            "\" in a partial index");
  }
  if (slot_.count(static_cast<uint32_t>(b)) > 0) return Status::ok();
  CKPT_ASSIGN_OR_RETURN(const BoxRecord r, parse_record(ti, b, p, where));
  slot_.emplace(static_cast<uint32_t>(b), static_cast<uint32_t>(boxes_.size()));
  boxes_.push_back(r);
  return Status::ok();
}

// The checks of one box record: known ids, inside the grid, first corner before last, in cell
// order after the box before it (when that one's cells are known).
Status GlobalIndex::check_box(const IndexTensor& t, size_t b, const BoxRecord& rec,
                              const std::string& where) const {
  auto bad = [&](const std::string& what) {
    return corrupt(where + ": tensor \"" + std::string(string(t.name)) + "\": box " +
                   std::to_string(b - t.first_box) + ": " + what);
  };
  if (rec.file >= files_.size()) {
    return bad("file " + std::to_string(rec.file) + " of " + std::to_string(files_.size()));
  }
  if (rec.dataset >= string_ends_.size()) {
    return bad("dataset is string " + std::to_string(rec.dataset) + " of " +
               std::to_string(string_ends_.size()));
  }
  if (rec.last_cell >= t.total_cells) {
    return bad("cell " + std::to_string(rec.last_cell) + " is outside the tensor's " +
               std::to_string(t.total_cells) + " cells");
  }
  // The per-dimension check below compares coordinates modulo the grid, which a first cell
  // past the grid would pass: the linear order comes first.
  if (rec.first_cell > rec.last_cell) {
    return bad("its first cell " + std::to_string(rec.first_cell) + " is past its last cell " +
               std::to_string(rec.last_cell));
  }
  for (int d = 0; d < t.ndim; ++d) {
    if ((rec.first_cell / t.cell_stride[d]) % t.cells[d] >
        (rec.last_cell / t.cell_stride[d]) % t.cells[d]) {
      return bad("its first cell " + std::to_string(rec.first_cell) + " is past its last cell " +
                 std::to_string(rec.last_cell) + " along dimension " + std::to_string(d));
    }
  }
  return Status::ok();
}

// Byte extents of one file do not overlap: bucket boxes by file, sort each bucket by offset.
Status GlobalIndex::check_byte_overlaps(const std::string& where) const {
  const size_t n_boxes = boxes_.size(), n_files = files_.size();
  std::vector<uint32_t> tensor_of(n_boxes);
  for (uint32_t ti = 0; ti < tensors_.size(); ++ti) {
    const IndexTensor& t = tensors_[ti];
    std::fill(tensor_of.begin() + t.first_box, tensor_of.begin() + t.first_box + t.box_count, ti);
  }
  std::vector<uint32_t> bucket_start(n_files + 1, 0);
  for (const BoxRecord& r : boxes_) ++bucket_start[r.file + 1];
  for (size_t f = 0; f < n_files; ++f) bucket_start[f + 1] += bucket_start[f];
  std::vector<uint32_t> order(n_boxes);
  {
    std::vector<uint32_t> fill(bucket_start.begin(), bucket_start.end() - 1);
    for (uint32_t b = 0; b < n_boxes; ++b) order[fill[boxes_[b].file]++] = b;
  }
  auto by_page = [&](uint32_t a, uint32_t b) {
    const uint32_t pa = boxes_[a].page, pb = boxes_[b].page;
    return pa != pb ? pa < pb : a < b;
  };
  for (size_t f = 0; f < n_files; ++f) {
    auto first = order.begin() + bucket_start[f], last = order.begin() + bucket_start[f + 1];
    // Writers lay a file's boxes out in tensor order, so a bucket is usually sorted already.
    if (!std::is_sorted(first, last, by_page)) std::sort(first, last, by_page);
    uint64_t end = 0;
    uint32_t prev = 0;
    for (auto it = first; it != last; ++it) {
      const uint32_t b = *it;
      if (it != first && end > box_offset(b)) {
        const uint32_t a = prev;
        return corrupt(where + ": file \"" + std::string(file_name(f)) +
                       "\": the bytes of tensor \"" + std::string(tensor_name(tensor_of[a])) +
                       "\" box " + extent_string(box_extent(tensor_of[a], a)) + " [" +
                       std::to_string(box_offset(a)) + ", " + std::to_string(end) +
                       ") overlap those of tensor \"" + std::string(tensor_name(tensor_of[b])) +
                       "\" box " + extent_string(box_extent(tensor_of[b], b)) + " at " +
                       std::to_string(box_offset(b)));
      }
      end = box_offset(b) + box_nbytes(tensor_of[b], b);
      prev = b;
    }
  }
  return Status::ok();
}

uint64_t GlobalIndex::geometry_words(const IndexTensor& t) const {
  uint64_t n = static_cast<uint64_t>(t.ndim);
  for (int d = 0; d < t.ndim; ++d) {
    if (t.block[d] > 0) {
      n += 2;
    } else if (t.step[d] > 0) {
      n += 1;
    } else {
      n += 2 + (t.cells[d] > 0 ? t.cells[d] - 1 : 0);
    }
  }
  return n;
}

Extent GlobalIndex::box_extent(size_t ti, size_t b) const {
  const IndexTensor& t = tensors_[ti];
  const auto [first_cell, last_cell] = box_cells(t, b);
  Extent e;
  e.ndim = t.ndim;
  for (int d = 0; d < t.ndim; ++d) {
    const uint64_t lo = (first_cell / t.cell_stride[d]) % t.cells[d];
    const uint64_t hi = (last_cell / t.cell_stride[d]) % t.cells[d];
    e.offsets[d] = cell_begin(t, d, lo);
    e.sizes[d] = cell_end(t, d, hi) - e.offsets[d];
  }
  return e;
}

uint64_t GlobalIndex::box_nbytes(size_t t, size_t b) const {
  return box_extent(t, b).numel() * dtype_size(tensors_[t].dtype);
}

uint64_t GlobalIndex::memory_bytes() const {
  return sizeof(*this) + tensors_.capacity() * sizeof(IndexTensor) +
         boxes_.capacity() * sizeof(BoxRecord) + files_.capacity() * sizeof(uint32_t) +
         geom_words_.capacity() * sizeof(uint64_t) + string_ends_.capacity() * sizeof(uint32_t) +
         strings_.capacity() + name_order_.capacity() * sizeof(uint32_t) +
         slot_.size() * 2 * sizeof(uint64_t) + slot_.bucket_count() * sizeof(void*) +
         listed_cells_.capacity() * sizeof(listed_cells_[0]) +
         box_datasets_.capacity() * sizeof(uint32_t);
}

// Decodes tensor t's shape and cut descriptors from geom_words_ (already bounds-checked to hold
// at least the shape), validating them; sets cells, strides, total_cells.
// `who` prefixes every message.
Status GlobalIndex::finish_tensor(IndexTensor* t, const std::string& who) const {
  if (t->ndim > kMaxBoxDims) {
    return corrupt(who + "has " + std::to_string(t->ndim) + " dimensions (at most " +
                   std::to_string(kMaxBoxDims) + ")");
  }
  uint64_t w = t->geom;
  auto word = [&](uint64_t* out) {
    if (w >= geom_words_.size()) return false;
    *out = geom_words_[w++];
    return true;
  };
  uint64_t numel = 1;
  for (int d = 0; d < t->ndim; ++d) {
    uint64_t s = 0;
    if (!word(&s)) return corrupt(who + "geometry runs past the geometry table");
    if (s > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return corrupt(who + "dimension " + std::to_string(d) + " has a negative extent");
    }
    t->shape[d] = static_cast<int64_t>(s);
    if (!mul_within(numel, s, kMaxTensorBytes, &numel)) {
      return corrupt(who + "holds more than 2^62 elements");
    }
  }
  uint64_t nbytes = 0;
  if (!mul_within(numel, dtype_size(t->dtype), kMaxTensorBytes, &nbytes)) {
    return corrupt(who + "holds more than 2^62 bytes");
  }
  uint64_t total = 1;
  for (int d = 0; d < t->ndim; ++d) {
    const std::string dim = "dimension " + std::to_string(d) + ": ";
    const uint64_t extent = static_cast<uint64_t>(t->shape[d]);
    uint64_t step = 0;
    if (!word(&step)) return corrupt(who + dim + "cut descriptor runs past the geometry table");
    t->block[d] = 0;
    if (step & kBlockedBit) {
      const uint64_t block = step & ~kBlockedBit;
      uint64_t inner = 0;
      if (!word(&inner)) return corrupt(who + dim + "block step runs past the geometry table");
      if (block == 0 || block > std::max<uint64_t>(extent, 1) || inner == 0 || inner > block) {
        return corrupt(who + dim + "blocks of " + std::to_string(block) + " cut every " +
                       std::to_string(inner) + " do not fit an extent of " +
                       std::to_string(extent));
      }
      t->step[d] = static_cast<int64_t>(inner);
      t->block[d] = static_cast<int64_t>(block);
      t->block_cells[d] = (block + inner - 1) / inner;
      if (extent == 0) {
        t->cells[d] = 0;
      } else {
        const uint64_t blocks = (extent + block - 1) / block;
        const uint64_t rest = extent - (blocks - 1) * block;
        t->cells[d] = (blocks - 1) * t->block_cells[d] + (rest + inner - 1) / inner;
      }
    } else if (step > 0) {
      if (step > std::max<uint64_t>(extent, 1)) {
        return corrupt(who + dim + "step " + std::to_string(step) + " exceeds the extent " +
                       std::to_string(extent));
      }
      t->step[d] = static_cast<int64_t>(step);
      t->cells[d] = extent == 0 ? 0 : (extent + step - 1) / step;
    } else {
      uint64_t n = 0;
      if (!word(&n)) return corrupt(who + dim + "cut count runs past the geometry table");
      if (n > extent || (extent > 0 && n > extent - 1)) {
        return corrupt(who + dim + std::to_string(n) + " cuts inside an extent of " +
                       std::to_string(extent));
      }
      if (n > geom_words_.size() - w)
        return corrupt(who + dim + "cuts run past the geometry table");
      t->step[d] = 0;
      t->cuts[d] = static_cast<uint32_t>(w);
      uint64_t prev = 0;
      for (uint64_t i = 0; i < n; ++i, ++w) {
        const uint64_t c = geom_words_[w];
        if (c <= prev || c >= extent) {
          return corrupt(who + dim + "cut " + std::to_string(c) + " is not strictly between " +
                         std::to_string(prev) + " and " + std::to_string(extent));
        }
        prev = c;
      }
      t->cells[d] = extent == 0 ? 0 : n + 1;
    }
    if (!mul_within(total, t->cells[d], kMaxCells, &total)) {
      return corrupt(who + "has more than 2^32 cells");
    }
  }
  t->total_cells = total;
  uint64_t stride = 1;
  for (int d = t->ndim - 1; d >= 0; --d) {
    t->cell_stride[d] = stride;
    stride *= std::max<uint64_t>(t->cells[d], 1);
  }
  return Status::ok();
}

// Sets cell_aligned and max_row_span from the tensor's (validated) boxes' cells. A partial
// index knows cell_aligned from its head already.
void GlobalIndex::scan_boxes(IndexTensor* t) const {
  t->max_row_span = 0;
  if (partial_ && t->cell_aligned) return;
  if (!partial_) t->cell_aligned = t->box_count == t->total_cells;
  for (uint32_t i = 0; i < t->box_count; ++i) {
    const auto [first, last] = box_cells(*t, t->first_box + i);
    if (first != i || last != i) t->cell_aligned = false;
    if (t->ndim > 0) {
      const uint64_t span = last / t->cell_stride[0] - first / t->cell_stride[0];
      t->max_row_span = std::max(t->max_row_span, span);
    }
  }
}

// --- IndexBuilder --------------------------------------------------------------------------------

IndexBuilder::IndexBuilder(int64_t step) { index_.step = step; }

void IndexBuilder::reserve(size_t tensors, size_t boxes) {
  index_.tensors_.reserve(tensors);
  index_.boxes_.reserve(boxes);
}

Result<uint32_t> IndexBuilder::intern(std::string_view s) {
  auto it = strings_.find(std::string(s));
  if (it != strings_.end()) return it->second;
  if (index_.strings_.size() + s.size() > std::numeric_limits<uint32_t>::max()) {
    return invalid_argument("the index's string table would pass 4 GiB");
  }
  const uint32_t id = static_cast<uint32_t>(index_.string_ends_.size());
  index_.strings_.append(s);
  index_.string_ends_.push_back(static_cast<uint32_t>(index_.strings_.size()));
  strings_.emplace(std::string(s), id);
  return id;
}

Result<uint32_t> IndexBuilder::add_file(std::string_view name) {
  CKPT_ASSIGN_OR_RETURN(const uint32_t s, intern(name));
  auto it = file_of_string_.find(s);
  if (it != file_of_string_.end()) return it->second;
  const uint32_t id = static_cast<uint32_t>(index_.files_.size());
  index_.files_.push_back(s);
  file_of_string_.emplace(s, id);
  return id;
}

Status IndexBuilder::add_tensor(const TensorSpec& spec, const std::vector<BoxSource>& boxes) {
  const std::string who = "tensor \"" + spec.name + "\": ";
  auto named = strings_.find(spec.name);
  if (named != strings_.end() && tensor_names_.count(named->second) > 0) {
    return invalid_argument(who + "added twice");
  }
  const int ndim = static_cast<int>(spec.shape.size());
  if (ndim > kMaxBoxDims) {
    return invalid_argument(who + "has " + std::to_string(ndim) + " dimensions (at most " +
                            std::to_string(kMaxBoxDims) + ")");
  }
  for (int d = 0; d < ndim; ++d) {
    if (spec.shape[d] < 0) return invalid_argument(who + "has a negative dimension");
  }
  if (index_.boxes_.size() + boxes.size() > std::numeric_limits<uint32_t>::max()) {
    return invalid_argument(who + "the index would hold more than 2^32 boxes");
  }
  std::vector<const BoxSource*> kept;
  kept.reserve(boxes.size());
  for (const BoxSource& b : boxes) {
    const Extent& e = b.extent;
    if (e.ndim != ndim) {
      return invalid_argument(who + "box " + extent_string(e) + " has " + std::to_string(e.ndim) +
                              " dimensions, the tensor " + std::to_string(ndim));
    }
    for (int d = 0; d < ndim; ++d) {
      if (e.offsets[d] < 0 || e.sizes[d] < 0 || e.offsets[d] > spec.shape[d] - e.sizes[d]) {
        return invalid_argument(
            who + "box " + extent_string(e) + " is outside the tensor " +
            extent_string(make_extent(std::vector<int64_t>(ndim, 0), spec.shape)));
      }
    }
    if (e.empty()) continue;
    if (b.file >= index_.files_.size()) {
      return invalid_argument(who + "box " + extent_string(e) + " names unknown file " +
                              std::to_string(b.file));
    }
    if (b.dataset >= index_.string_ends_.size()) {
      return invalid_argument(who + "box " + extent_string(e) + " names unknown dataset string " +
                              std::to_string(b.dataset));
    }
    if (b.offset % kIndexPageBytes != 0 ||
        b.offset / kIndexPageBytes > std::numeric_limits<uint32_t>::max()) {
      return invalid_argument(who + "box " + extent_string(e) + ": byte offset " +
                              std::to_string(b.offset) +
                              " is not a multiple of 4096 below 16 TiB (docs/format.md §3)");
    }
    kept.push_back(&b);
  }

  // Geometry: the shape, then per dimension a step or the interior cuts.
  std::vector<uint64_t>& words = index_.geom_words_;
  const size_t words_before = words.size();
  IndexTensor t;
  t.dtype = spec.dtype;
  t.placement = spec.placement;
  t.ndim = ndim;
  t.geom = static_cast<uint32_t>(words_before);
  if (words_before > std::numeric_limits<uint32_t>::max() - 1024) {
    return invalid_argument(who + "the geometry table would pass 2^32 words");
  }
  for (int d = 0; d < ndim; ++d) words.push_back(static_cast<uint64_t>(spec.shape[d]));
  for (int d = 0; d < ndim; ++d) {
    const int64_t extent = spec.shape[d];
    scratch_.clear();
    scratch_.push_back(0);
    scratch_.push_back(extent);
    for (const BoxSource* b : kept) {
      scratch_.push_back(b->extent.offsets[d]);
      scratch_.push_back(b->extent.offsets[d] + b->extent.sizes[d]);
    }
    std::sort(scratch_.begin(), scratch_.end());
    scratch_.erase(std::unique(scratch_.begin(), scratch_.end()), scratch_.end());
    // Uniform: every gap but the last is the step, the last is at most the step.
    const int64_t step = scratch_.size() > 1 ? scratch_[1] : 1;
    bool uniform = true;
    for (size_t i = 2; i < scratch_.size() && uniform; ++i) {
      const int64_t gap = scratch_[i] - scratch_[i - 1];
      uniform = i + 1 < scratch_.size() ? gap == step : gap <= step;
    }
    // Blocked: blocks of B (the first cut whose gap is short of the step), each cut every step.
    int64_t block = 0;
    if (!uniform) {
      for (size_t i = 2; i < scratch_.size() && block == 0; ++i) {
        if (scratch_[i] - scratch_[i - 1] < step) block = scratch_[i];
      }
      bool fits = block > step;
      size_t i = 0;
      for (int64_t base = 0; fits && base < extent; base += block) {
        for (int64_t c = base; fits && c < std::min(base + block, extent); c += step, ++i) {
          fits = i < scratch_.size() && scratch_[i] == c;
        }
      }
      if (!(fits && i + 1 == scratch_.size() && scratch_.back() == extent)) block = 0;
    }
    if (uniform) {
      words.push_back(static_cast<uint64_t>(std::max<int64_t>(step, 1)));
    } else if (block > 0) {
      words.push_back(kBlockedBit | static_cast<uint64_t>(block));
      words.push_back(static_cast<uint64_t>(step));
    } else {
      words.push_back(0);
      words.push_back(scratch_.size() - 2);
      for (size_t i = 1; i + 1 < scratch_.size(); ++i) words.push_back(scratch_[i]);
    }
  }
  if (words.size() > std::numeric_limits<uint32_t>::max()) {
    words.resize(words_before);
    return invalid_argument(who + "the geometry table would pass 2^32 words");
  }
  index_.tensors_.push_back(t);
  IndexTensor& added = index_.tensors_.back();
  Status s = index_.finish_tensor(&added, who);
  if (!s.is_ok()) {
    index_.tensors_.pop_back();
    words.resize(words_before);
    return invalid_argument(s.message());
  }
  auto name = intern(spec.name);
  if (!name.is_ok()) {
    index_.tensors_.pop_back();
    words.resize(words_before);
    return name.status();
  }
  added.name = *name;
  tensor_names_.insert(*name);
  added.first_box = static_cast<uint32_t>(index_.boxes_.size());
  added.box_count = static_cast<uint32_t>(kept.size());
  for (const BoxSource* b : kept) {
    BoxRecord r;
    r.file = b->file;
    r.dataset = b->dataset;
    r.page = static_cast<uint32_t>(b->offset / kIndexPageBytes);
    r.xxh3 = b->xxh3;
    uint64_t first = 0, last = 0;
    for (int d = 0; d < ndim; ++d) {
      const Extent& e = b->extent;
      first += index_.cell_of(added, d, e.offsets[d]) * added.cell_stride[d];
      last += index_.cell_of(added, d, e.offsets[d] + e.sizes[d] - 1) * added.cell_stride[d];
    }
    r.first_cell = static_cast<uint32_t>(first);
    r.last_cell = static_cast<uint32_t>(last);
    index_.boxes_.push_back(r);
  }
  std::sort(index_.boxes_.begin() + added.first_box, index_.boxes_.end(), record_less);
  index_.box_total_ = index_.boxes_.size();
  index_.scan_boxes(&added);
  return Status::ok();
}

void GlobalIndex::sort_names() {
  name_order_.resize(tensors_.size());
  for (uint32_t i = 0; i < name_order_.size(); ++i) name_order_[i] = i;
  std::sort(name_order_.begin(), name_order_.end(),
            [&](uint32_t a, uint32_t b) { return tensor_name(a) < tensor_name(b); });
}

// Tensors in name order (the order version 2 stores them in), their boxes renumbered to match.
GlobalIndex IndexBuilder::finish() && {
  GlobalIndex& x = index_;
  x.box_total_ = x.boxes_.size();
  x.sort_names();
  if (!std::is_sorted(x.name_order_.begin(), x.name_order_.end())) {
    std::vector<IndexTensor> tensors;
    std::vector<BoxRecord> boxes;
    tensors.reserve(x.tensors_.size());
    boxes.reserve(x.boxes_.size());
    for (uint32_t t : x.name_order_) {
      IndexTensor it = x.tensors_[t];
      const auto first = x.boxes_.begin() + it.first_box;
      it.first_box = static_cast<uint32_t>(boxes.size());
      boxes.insert(boxes.end(), first, first + it.box_count);
      tensors.push_back(it);
    }
    x.tensors_ = std::move(tensors);
    x.boxes_ = std::move(boxes);
    x.sort_names();
  }
  return std::move(x);
}

}  // namespace ckpt::store
