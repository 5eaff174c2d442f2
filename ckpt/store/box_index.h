// The global box index of a sharded checkpoint (format version 2, docs/format.md "Version 2").
//
// A global tensor (name, dtype, global shape, placement kind) is stored as boxes: box b holds the
// elements offsets[d] .. offsets[d] + sizes[d] of the global tensor, row-major, in one dataset of
// one rank file, at a byte offset, with its XXH3-64. The index lists every tensor and every box.
//
// Geometry is stored per tensor as a grid: along each dimension the sorted union of every box
// boundary (its "cuts") cuts the tensor into cells, so a box is a range of cells, named by the
// row-major linear index of its first and last cell. A dimension whose cuts are 0, s, 2s, ... is
// stored as the one step s (regular DTensor sharding); one cut into blocks of B, each cut every s
// (Shard(d) over TP, then over FSDP inside each TP block), as (B, s); any other as its list of
// cuts.
//
// The INDEX file (encode_index; version 2 since index version 1 put every box in one table every
// reader parsed whole) is a small head — header, tensors, their grids, files — that every reader
// reads, then one 16-byte record per box (file, offset, XXH3), placed so that the records of one
// cell of every tensor that shares a grid lie together: a restoring rank reads the head and the
// few runs of records its targets need (decode_index_head, record_offset, load_record), not the
// whole file. decode_index reads either version whole.
//
// IndexBuilder collects tensors and their boxes (rank 0 at commit); encode_index / decode_index
// turn a GlobalIndex into the bytes of the INDEX file and back; the decoders treat their input as
// untrusted. A GlobalIndex is an immutable value after it is built or decoded (a partial one
// after its records are loaded): any number of threads may read it. No I/O here.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "ckpt/base/status.h"
#include "ckpt/format/dtype.h"

namespace ckpt::store {

constexpr int kMaxBoxDims = 8;
constexpr uint64_t kIndexPageBytes = 4096;  // box byte offsets are multiples of it (format §3)

// How the tensor was placed when it was saved. Informational: the boxes are authoritative.
enum class Placement : uint8_t {
  kWhole = 0,       // a plain tensor of one process
  kReplicated = 1,  // the same on every rank; written once, by its owner (box_owner.h)
  kSharded = 2,     // DTensor Shard(d) over one or more mesh dimensions
  kFlat = 3,        // flat 1-D ranges (FSDP1 / ZeRO) split into row boxes
};
const char* placement_name(Placement p);

// An N-d box of element coordinates: offsets[d] .. offsets[d] + sizes[d] for d < ndim.
struct Extent {
  int ndim = 0;
  std::array<int64_t, kMaxBoxDims> offsets{};
  std::array<int64_t, kMaxBoxDims> sizes{};

  uint64_t numel() const;  // product of sizes (1 for ndim 0); callers keep it below 2^63
  bool empty() const;      // some size is 0
};
Extent make_extent(const std::vector<int64_t>& offsets, const std::vector<int64_t>& sizes);
bool operator==(const Extent& a, const Extent& b);
// "[0:4, 8:16]" (half-open ranges per dimension; "[]" for a 0-d tensor)
std::string extent_string(const Extent& e);

struct TensorSpec {
  std::string name;  // the FQN, e.g. "model/layers.0.attn.wq.weight"
  DType dtype = DType::kFloat32;
  std::vector<int64_t> shape;  // global shape
  Placement placement = Placement::kWhole;
};

// One box as the builder receives it. `dataset` is an id from IndexBuilder::intern (the dataset's
// path inside the rank file); `file` an id from add_file.
struct BoxSource {
  Extent extent;
  uint32_t file = 0;
  uint32_t dataset = 0;
  uint64_t offset = 0;  // byte offset of the dataset's data in the rank file
  uint64_t xxh3 = 0;    // XXH3-64 of the box's bytes
};

// A box: where its bytes are and which cells of its tensor's grid it covers.
struct BoxRecord {
  uint32_t file = 0;
  uint32_t dataset = 0;  // string id
  uint32_t page = 0;     // byte offset / kIndexPageBytes
  uint32_t first_cell = 0;
  uint32_t last_cell = 0;  // inclusive
  uint64_t xxh3 = 0;
};

// One tensor of the index, with its grid decoded for fast lookups.
struct IndexTensor {
  uint32_t name = 0;  // string id
  DType dtype = DType::kFloat32;
  Placement placement = Placement::kWhole;
  int ndim = 0;
  uint32_t first_box = 0;  // its boxes are boxes[first_box, first_box + box_count), in cell order
  uint32_t box_count = 0;
  uint32_t geom = 0;  // first geometry word: shape[ndim], then one descriptor per dimension
  std::array<int64_t, kMaxBoxDims> shape{};
  std::array<int64_t, kMaxBoxDims> step{};  // > 0: cuts every step; 0: explicit cuts
  // > 0: blocked, cuts every `step` within blocks of `block` (TP outside, FSDP inside one
  // dimension); block_cells: cells per whole block.
  std::array<int64_t, kMaxBoxDims> block{};
  std::array<uint64_t, kMaxBoxDims> block_cells{};
  std::array<uint32_t, kMaxBoxDims> cuts{};         // explicit: first interior cut in `geom_words`
  std::array<uint64_t, kMaxBoxDims> cells{};        // cells along each dimension
  std::array<uint64_t, kMaxBoxDims> cell_stride{};  // row-major stride of the cell grid
  uint64_t total_cells = 0;
  // Every box is one cell and every cell has one box: box first_box + c is cell c.
  bool cell_aligned = false;
  // The most cells any box spans along dimension 0, minus one (0 for a regular grid).
  uint64_t max_row_span = 0;
  // Version 2: box first_box + i's record is record record_base + i * record_stride of the
  // file's record table (records of tensors that share a grid are interleaved cell by cell).
  uint32_t record_base = 0;
  uint32_t record_stride = 1;
  // A partial index, a tensor whose boxes are not one per cell: its boxes' cells start at
  // listed_cells_[cells_at].
  uint32_t cells_at = 0;
  // Boxes whose dataset is not the tensor's name: their dataset string ids start at
  // box_datasets_[datasets_at]; kNoDatasets when every box's dataset is the tensor's name.
  uint32_t datasets_at = UINT32_MAX;
};
constexpr uint32_t kNoDatasets = UINT32_MAX;

constexpr uint64_t kIndexRecordBytes = 16;  // version 2: file u32, page u32, XXH3-64

class GlobalIndex {
 public:
  int64_t step = 0;

  size_t tensor_count() const { return tensors_.size(); }
  size_t box_count() const { return box_total_; }
  size_t file_count() const { return files_.size(); }
  const IndexTensor& tensor(size_t i) const { return tensors_[i]; }
  // Box i's record. In a partial index, only of a loaded box (has_record).
  const BoxRecord& box(size_t i) const { return partial_ ? boxes_[slot_.at(i)] : boxes_[i]; }
  // The first and last cell of box b of tensor t (needs no record).
  std::pair<uint32_t, uint32_t> box_cells(const IndexTensor& t, size_t b) const;

  // The INDEX version this value was decoded from (2 when built).
  int version() const { return version_; }
  // A partial index (decode_index_head) holds every tensor and its grid but the records of only
  // the boxes loaded with load_record.
  bool partial() const { return partial_; }
  bool has_record(size_t b) const { return !partial_ || slot_.count(b) > 0; }
  // Version 2: where box b (of tensor t) has its 16-byte record in the INDEX file.
  uint64_t record_offset(const IndexTensor& t, size_t b) const;
  // Loads box b's record from its 16 bytes at record_offset (a partial index). kCorrupt
  // "<where>: ..." when the record names an unknown file; once per box.
  Status load_record(size_t ti, size_t b, const unsigned char* p, const std::string& where);
  std::string_view string(uint32_t id) const;
  std::string_view tensor_name(size_t i) const { return string(tensors_[i].name); }
  std::string_view file_name(uint32_t file) const { return string(files_[file]); }
  // The tensor called `name`, or -1.
  int64_t find_tensor(std::string_view name) const;

  // Element range of box `b` of tensor `t`.
  Extent box_extent(size_t t, size_t b) const;
  uint64_t box_offset(size_t b) const { return uint64_t{box(b).page} * kIndexPageBytes; }
  uint64_t box_nbytes(size_t t, size_t b) const;
  // Cell boundaries along dimension d of tensor t: [cell_begin, cell_end) of cell c.
  int64_t cell_begin(const IndexTensor& t, int d, uint64_t c) const;
  int64_t cell_end(const IndexTensor& t, int d, uint64_t c) const;
  // The cell of tensor t holding coordinate x along dimension d (0 <= x < shape[d]).
  uint64_t cell_of(const IndexTensor& t, int d, int64_t x) const;

  // Bytes held by this value (vectors' capacities and the string table).
  uint64_t memory_bytes() const;
  // Size of encode_index's output (version 2), and of its head (header, tensors, grids, files:
  // what every reader reads before the records).
  uint64_t encoded_bytes() const;
  uint64_t directory_bytes() const;

 private:
  friend class IndexBuilder;
  friend class IndexV1Codec;
  friend class IndexV2Codec;
  Status finish_tensor(IndexTensor* t, const std::string& who) const;
  Status check_box(const IndexTensor& t, size_t b, const BoxRecord& rec,
                   const std::string& where) const;
  // Box b's record from its 16 bytes, its cells and dataset from the head, checked.
  Result<BoxRecord> parse_record(size_t ti, size_t b, const unsigned char* p,
                                 const std::string& where) const;
  Status check_byte_overlaps(const std::string& where) const;
  void scan_boxes(IndexTensor* t) const;
  void sort_names();
  uint64_t geometry_words(const IndexTensor& t) const;  // shape and cut descriptors

  int version_ = 2;
  bool partial_ = false;
  size_t box_total_ = 0;
  std::vector<IndexTensor> tensors_;
  std::vector<BoxRecord> boxes_;                 // every box, or (partial) the loaded ones
  std::unordered_map<uint32_t, uint32_t> slot_;  // partial: box id -> position in boxes_
  std::vector<std::pair<uint32_t, uint32_t>> listed_cells_;  // partial: see IndexTensor
  std::vector<uint32_t> box_datasets_;                       // version 2: see IndexTensor
  uint64_t head_bytes_ = 0;                                  // version 2: the file's head
  std::vector<uint32_t> files_;                              // string ids of the rank files
  std::vector<uint64_t> geom_words_;                         // shapes and cut descriptors
  std::vector<uint32_t> string_ends_;  // string i is strings_[ends[i-1], ends[i])
  std::string strings_;
  std::vector<uint32_t> name_order_;  // tensors sorted by name
};

// Builds a GlobalIndex. Not thread-safe. Each call validates what it is given, so a bad box is
// refused naming its tensor and range, before anything is kept.
class IndexBuilder {
 public:
  explicit IndexBuilder(int64_t step = 0);
  // Capacity hints (the builder never needs them to be right).
  void reserve(size_t tensors, size_t boxes);
  // The id of string `s` in the string table (one id per distinct string).
  Result<uint32_t> intern(std::string_view s);
  // The id of rank file `name` (one id per distinct name).
  Result<uint32_t> add_file(std::string_view name);
  // Adds a tensor and all its boxes. Boxes holding no element are dropped. On failure
  // (kInvalidArgument: duplicate name, more than kMaxBoxDims dimensions, a negative extent, a
  // box outside the tensor or of another rank, an unknown file or string id, a byte offset not a
  // multiple of 4096 or past 16 TiB, more than 2^32 cells) nothing of the tensor is kept.
  Status add_tensor(const TensorSpec& spec, const std::vector<BoxSource>& boxes);
  GlobalIndex finish() &&;

 private:
  GlobalIndex index_;
  std::unordered_map<std::string, uint32_t> strings_;
  std::unordered_map<uint32_t, uint32_t> file_of_string_;
  std::unordered_set<uint32_t> tensor_names_;
  std::vector<int64_t> scratch_;
};

// The INDEX file's bytes (little-endian; docs/format.md "Version 2"), in index version 2 or, for
// tests of what older checkpoints hold, 1. Deterministic. Refuses nothing: a GlobalIndex is valid.
std::string encode_index(const GlobalIndex& index, int version = 2);
// Parses and validates a whole INDEX file of either version. On failure a kCorrupt Status
// "<where>: ..." that says what is wrong (bad magic, truncated or oversized section, hash
// mismatch, an id out of range, a box outside its tensor's grid, boxes out of order, overlapping
// byte extents in one file, ...); kUnsupported for an unknown version. Never trusts a count
// before checking it against the input size.
Result<GlobalIndex> decode_index(const std::string& bytes, const std::string& where);

// A version-2 INDEX read in parts: the size of its head (from the 64-byte header `header`), the
// head decoded as a partial index — every tensor, grid and file, no record — and the XXH3 of the
// head that the commit record keeps (COMMIT.json's "regions_xxh3" of the INDEX), so a reader can
// check the head without reading the rest. index_head_bytes: kCorrupt on a header that is not
// version 2's, kUnsupported for version 1 (read it whole).
Result<uint64_t> index_head_bytes(const std::string& header, uint64_t file_bytes,
                                  const std::string& where);
Result<GlobalIndex> decode_index_head(const std::string& head, const std::string& where);
uint64_t index_head_xxh3(const std::string& encoded);

}  // namespace ckpt::store
