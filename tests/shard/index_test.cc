// The box index round-trips: what the builder was given is what a decoder of its bytes sees.
#include <algorithm>
#include <catch2/catch.hpp>

#include "ckpt/store/box_index.h"
#include "tests/shard/shard_layout.h"

namespace ckpt::store::index_test {
namespace {

using testing::mesh_box;

struct Given {
  std::string tensor;
  Extent extent;
  std::string file;
  std::string dataset;
  uint64_t offset;
  uint64_t xxh3;
};

// Several layouts in one index: a regular 2-D grid (uniform cuts), uneven rows, flat-range row
// boxes (a box spanning two column cells), a 0-d tensor, an empty tensor, a 3-D tensor, a TP x FSDP
// split of one dimension (blocked cuts), irregular cuts (a list).
std::vector<Given> sample_boxes() {
  std::vector<Given> g;
  uint64_t page = 1;
  auto add = [&](const std::string& t, Extent e, int rank) {
    g.push_back({t, e, "rank-0000" + std::to_string(rank) + ".h5", "/" + t, 4096 * page++,
                 0x9e3779b97f4a7c15ull * page});
  };
  for (int r = 0; r < 4; ++r) add("grid", mesh_box({8, 16}, {2, 2}, {0, 1}, r), r);
  for (int r = 0; r < 4; ++r) add("uneven", mesh_box({17, 3}, {4}, {0}, r), r);
  // flat ranges of a [5, 4] tensor over 2 ranks: [0, 10) and [10, 20) as row boxes
  add("flat", make_extent({0, 0}, {2, 4}), 0);
  add("flat", make_extent({2, 0}, {1, 2}), 0);
  add("flat", make_extent({2, 2}, {1, 2}), 1);
  add("flat", make_extent({3, 0}, {2, 4}), 1);
  add("scalar", Extent{}, 0);
  // TP 2 outside, FSDP 3 inside dimension 0 of [22, 3]: blocks of 11 cut every 4.
  for (int r = 0; r < 6; ++r) add("blocked", mesh_box({22, 3}, {2, 3}, {0, 0}, r), r);
  // Cuts 0, 1, 4, 10: neither uniform nor blocked, stored as a list.
  add("irregular", make_extent({0}, {1}), 0);
  add("irregular", make_extent({1}, {3}), 1);
  add("irregular", make_extent({4}, {6}), 2);
  for (int r = 0; r < 2; ++r) add("cube", mesh_box({3, 4, 6}, {2}, {2}, r), r);
  return g;
}

GlobalIndex build(const std::vector<Given>& given) {
  IndexBuilder b(1234);
  struct T {
    std::string name;
    std::vector<int64_t> shape;
    DType dtype;
  };
  const std::vector<T> tensors = {
      {"grid", {8, 16}, DType::kFloat32},    {"uneven", {17, 3}, DType::kBFloat16},
      {"flat", {5, 4}, DType::kFloat64},     {"scalar", {}, DType::kInt64},
      {"empty", {0, 7}, DType::kFloat32},    {"cube", {3, 4, 6}, DType::kUInt8},
      {"blocked", {22, 3}, DType::kFloat16}, {"irregular", {10}, DType::kInt8}};
  for (const T& t : tensors) {
    std::vector<BoxSource> sources;
    for (const Given& x : given) {
      if (x.tensor != t.name) continue;
      BoxSource s;
      s.extent = x.extent;
      s.file = *b.add_file(x.file);
      s.dataset = *b.intern(x.dataset);
      s.offset = x.offset;
      s.xxh3 = x.xxh3;
      sources.push_back(s);
    }
    const Status st = b.add_tensor({t.name, t.dtype, t.shape, Placement::kSharded}, sources);
    INFO(st.to_string());
    REQUIRE(st.is_ok());
  }
  return std::move(b).finish();
}

TEST_CASE("box index: encode then decode gives back every tensor and box", "[shard]") {
  const std::vector<Given> given = sample_boxes();
  const GlobalIndex built = build(given);
  const std::string bytes = encode_index(built);
  REQUIRE(bytes.size() == built.encoded_bytes());
  auto decoded = decode_index(bytes, "INDEX");
  INFO(decoded.status().to_string());
  REQUIRE(decoded.is_ok());
  const GlobalIndex& x = *decoded;
  CHECK(x.step == 1234);
  CHECK(x.tensor_count() == 8);
  CHECK(x.box_count() == given.size());
  CHECK(encode_index(x) == bytes);  // canonical: a second encoding is byte for byte the same

  // Every given box is found, with its geometry and location.
  size_t found = 0;
  for (const Given& g : given) {
    const int64_t t = x.find_tensor(g.tensor);
    REQUIRE(t >= 0);
    const IndexTensor& it = x.tensor(t);
    for (uint32_t b = it.first_box; b < it.first_box + it.box_count; ++b) {
      if (x.box_extent(t, b) == g.extent && x.box_offset(b) == g.offset) {
        CHECK(x.file_name(x.box(b).file) == g.file);
        CHECK(x.string(x.box(b).dataset) == g.dataset);
        CHECK(x.box(b).xxh3 == g.xxh3);
        CHECK(x.box_nbytes(t, b) == g.extent.numel() * dtype_size(it.dtype));
        ++found;
      }
    }
  }
  CHECK(found == given.size());
  CHECK(x.find_tensor("missing") == -1);

  // The grid and the 3-D split are uniform cuts with one box per cell; torch.chunk's uneven rows
  // are uniform too; flat ranges are not one box per cell.
  const IndexTensor& grid = x.tensor(x.find_tensor("grid"));
  CHECK(grid.step[0] == 4);
  CHECK(grid.step[1] == 8);
  CHECK(grid.cell_aligned);
  CHECK(x.tensor(x.find_tensor("cube")).cell_aligned);
  const IndexTensor& uneven = x.tensor(x.find_tensor("uneven"));
  CHECK(uneven.step[0] == 5);  // 0, 5, 10, 15, 17: torch.chunk's cuts are uniform
  CHECK(uneven.cells[0] == 4);
  const IndexTensor& flat = x.tensor(x.find_tensor("flat"));
  CHECK(flat.block[0] == 3);  // row cuts 0, 2 | 3, 5: blocks of 3 cut every 2
  CHECK(flat.step[0] == 2);
  CHECK_FALSE(flat.cell_aligned);
  CHECK(flat.max_row_span == 0);  // row cuts 0, 2, 3, 5: each box is one row of cells
  const IndexTensor& blocked = x.tensor(x.find_tensor("blocked"));
  CHECK(blocked.block[0] == 11);  // cuts 0, 4, 8, 11, 15, 19, 22
  CHECK(blocked.step[0] == 4);
  CHECK(blocked.cells[0] == 6);
  CHECK(blocked.cell_aligned);
  CHECK(x.cell_of(blocked, 0, 12) == 3);
  CHECK(x.cell_begin(blocked, 0, 5) == 19);
  CHECK(x.cell_end(blocked, 0, 2) == 11);
  const IndexTensor& irregular = x.tensor(x.find_tensor("irregular"));
  CHECK(irregular.step[0] == 0);
  CHECK(irregular.block[0] == 0);
  CHECK(irregular.cells[0] == 3);
  CHECK(x.cell_of(irregular, 0, 3) == 1);
  CHECK(x.tensor(x.find_tensor("empty")).box_count == 0);
  CHECK(x.tensor(x.find_tensor("scalar")).box_count == 1);
  CHECK(x.tensor(x.find_tensor("scalar")).dtype == DType::kInt64);
  CHECK(x.tensor(x.find_tensor("uneven")).dtype == DType::kBFloat16);
}

TEST_CASE("box index: a box record is 16 bytes on disk, after the head", "[shard]") {
  const GlobalIndex x = build(sample_boxes());
  CHECK(x.encoded_bytes() - x.directory_bytes() == 16 * x.box_count());
  const std::string bytes = encode_index(x);
  auto head = index_head_bytes(bytes.substr(0, 64), bytes.size(), "INDEX");
  REQUIRE(head.is_ok());
  CHECK(*head == x.directory_bytes());
}

// What an index version 1 file (checkpoints written before version 2) holds is what version 2
// holds: the same tensors, boxes, files and datasets.
void check_same(const GlobalIndex& a, const GlobalIndex& b) {
  REQUIRE(a.tensor_count() == b.tensor_count());
  REQUIRE(a.box_count() == b.box_count());
  REQUIRE(a.file_count() == b.file_count());
  CHECK(a.step == b.step);
  for (size_t t = 0; t < a.tensor_count(); ++t) {
    const int64_t u = b.find_tensor(a.tensor_name(t));
    REQUIRE(u >= 0);
    const IndexTensor &x = a.tensor(t), &y = b.tensor(u);
    CHECK(x.dtype == y.dtype);
    CHECK(x.placement == y.placement);
    CHECK(x.cell_aligned == y.cell_aligned);
    REQUIRE(x.box_count == y.box_count);
    for (uint32_t i = 0; i < x.box_count; ++i) {
      const uint32_t p = x.first_box + i, q = y.first_box + i;
      CHECK(a.box_extent(t, p) == b.box_extent(u, q));
      CHECK(a.file_name(a.box(p).file) == b.file_name(b.box(q).file));
      CHECK(a.string(a.box(p).dataset) == b.string(b.box(q).dataset));
      CHECK(a.box_offset(p) == b.box_offset(q));
      CHECK(a.box(p).xxh3 == b.box(q).xxh3);
    }
  }
}

TEST_CASE("box index: index version 1 files still decode, to the same index", "[shard]") {
  const GlobalIndex built = build(sample_boxes());
  const std::string v1 = encode_index(built, 1);
  auto decoded = decode_index(v1, "INDEX");
  INFO(decoded.status().to_string());
  REQUIRE(decoded.is_ok());
  CHECK(decoded->version() == 1);
  check_same(built, *decoded);
  // and re-encoded as version 2 and decoded again, still the same
  auto again = decode_index(encode_index(*decoded), "INDEX");
  REQUIRE(again.is_ok());
  CHECK(again->version() == 2);
  check_same(built, *again);
  CHECK(encode_index(*again) == encode_index(built));
  // version 1 has no head to read alone
  CHECK(index_head_bytes(v1.substr(0, 64), v1.size(), "INDEX").status().code() ==
        Code::kUnsupported);
}

TEST_CASE("box index: the head alone, then some records, as a restoring rank reads it", "[shard]") {
  const GlobalIndex built = build(sample_boxes());
  const std::string bytes = encode_index(built);
  const uint64_t head = *index_head_bytes(bytes.substr(0, 64), bytes.size(), "INDEX");
  auto partial = decode_index_head(bytes.substr(0, head), "INDEX");
  INFO(partial.status().to_string());
  REQUIRE(partial.is_ok());
  GlobalIndex& x = *partial;
  CHECK(x.partial());
  CHECK(x.box_count() == built.box_count());
  // Every box's cells and extent are known without its record; no record is loaded yet.
  for (size_t t = 0; t < x.tensor_count(); ++t) {
    const IndexTensor& it = x.tensor(t);
    const int64_t u = built.find_tensor(x.tensor_name(t));
    REQUIRE(u >= 0);
    for (uint32_t i = 0; i < it.box_count; ++i) {
      CHECK_FALSE(x.has_record(it.first_box + i));
      CHECK(x.box_extent(t, it.first_box + i) ==
            built.box_extent(u, built.tensor(u).first_box + i));
    }
  }
  // The records of two tensors, from where record_offset says they are.
  for (const char* name : {"grid", "flat"}) {
    const int64_t t = x.find_tensor(name);
    const IndexTensor& it = x.tensor(t);
    for (uint32_t b = it.first_box; b < it.first_box + it.box_count; ++b) {
      const uint64_t at = x.record_offset(it, b);
      REQUIRE(at + 16 <= bytes.size());
      REQUIRE(
          x.load_record(t, b, reinterpret_cast<const unsigned char*>(bytes.data()) + at, "INDEX")
              .is_ok());
      CHECK(x.has_record(b));
      const int64_t u = built.find_tensor(name);
      const uint32_t q = built.tensor(u).first_box + (b - it.first_box);
      CHECK(x.box(b).xxh3 == built.box(q).xxh3);
      CHECK(x.box_offset(b) == built.box_offset(q));
      CHECK(x.file_name(x.box(b).file) == built.file_name(built.box(q).file));
      CHECK(x.string(x.box(b).dataset) == built.string(built.box(q).dataset));
    }
  }
  CHECK_FALSE(x.has_record(x.tensor(x.find_tensor("cube")).first_box));
  // The head's hash is what the commit record keeps.
  CHECK(index_head_xxh3(bytes) != 0);
  std::string damaged = bytes.substr(0, head);
  damaged[head - 1] ^= 1;
  CHECK(decode_index_head(damaged, "INDEX").status().message().find("directory hash mismatch") !=
        std::string::npos);
}

// Records of the tensors that share a grid lie cell by cell: what one FSDP rank needs of many
// tensors (cell r of each) is one run of the file.
TEST_CASE("box index: one rank's records of tensors sharing a grid are adjacent", "[shard]") {
  IndexBuilder b;
  const int ranks = 8;
  std::vector<uint32_t> files;
  for (int r = 0; r < ranks; ++r)
    files.push_back(*b.add_file("rank-0000" + std::to_string(r) + ".h5"));
  uint64_t page = 1;
  for (const char* name : {"w1", "w1.exp_avg", "w1.exp_avg_sq", "w2", "w2.exp_avg"}) {
    std::vector<BoxSource> sources;
    ++page;
    for (int r = 0; r < ranks; ++r) {
      BoxSource s;
      s.extent = mesh_box({64, 16}, {ranks}, {0}, r);
      s.file = files[r];
      s.dataset = *b.intern(name);
      s.offset = 4096 * page;
      s.xxh3 = 1000 + r;
      sources.push_back(s);
    }
    REQUIRE(b.add_tensor({name, DType::kFloat32, {64, 16}, Placement::kSharded}, sources).is_ok());
  }
  const GlobalIndex x = std::move(b).finish();
  const std::string bytes = encode_index(x);
  auto decoded = decode_index(bytes, "INDEX");
  INFO(decoded.status().to_string());
  REQUIRE(decoded.is_ok());
  const uint64_t head = decoded->directory_bytes();
  // One grid, five tensors, datasets named as the tensors (no per-box dataset in the head).
  for (int r = 0; r < ranks; ++r) {
    std::vector<uint64_t> at;
    for (size_t t = 0; t < decoded->tensor_count(); ++t) {
      const IndexTensor& it = decoded->tensor(t);
      at.push_back(decoded->record_offset(it, it.first_box + r));
    }
    std::sort(at.begin(), at.end());
    CHECK(at.front() == head + uint64_t(r) * 5 * 16);
    CHECK(at.back() == at.front() + 4 * 16);
  }
  CHECK(bytes.size() == head + 40 * 16);
  CHECK(head < 200);
}

TEST_CASE("box index: empty boxes are dropped, an uneven split keeps its rows", "[shard]") {
  // 3 rows over 4 ranks: torch.chunk gives 1, 1, 1, 0.
  IndexBuilder b;
  std::vector<BoxSource> sources;
  for (int r = 0; r < 4; ++r) {
    BoxSource s;
    s.extent = mesh_box({3, 5}, {4}, {0}, r);
    s.file = *b.add_file("rank-" + std::to_string(r));
    s.dataset = *b.intern("/w");
    s.offset = r == 3 ? 0 : 4096;
    sources.push_back(s);
  }
  REQUIRE(sources[3].extent.sizes[0] == 0);
  REQUIRE(b.add_tensor({"w", DType::kFloat32, {3, 5}, Placement::kSharded}, sources).is_ok());
  const GlobalIndex x = std::move(b).finish();
  CHECK(x.tensor(0).box_count == 3);
  auto again = decode_index(encode_index(x), "INDEX");
  REQUIRE(again.is_ok());
  CHECK(again->box_extent(0, 2) == make_extent({2, 0}, {1, 5}));
}

TEST_CASE("box index: the builder refuses what it cannot store, naming tensor and box", "[shard]") {
  IndexBuilder b;
  const uint32_t f = *b.add_file("rank-00000.h5");
  const uint32_t ds = *b.intern("/w");
  auto box = [&](Extent e, uint64_t offset) {
    BoxSource s;
    s.extent = e;
    s.file = f;
    s.dataset = ds;
    s.offset = offset;
    return s;
  };
  const TensorSpec w{"w", DType::kFloat32, {8, 4}, Placement::kSharded};
  Status s = b.add_tensor(w, {box(make_extent({6, 0}, {4, 4}), 0)});
  CHECK(s.code() == Code::kInvalidArgument);
  CHECK(s.message() == "tensor \"w\": box [6:10, 0:4] is outside the tensor [0:8, 0:4]");
  s = b.add_tensor(w, {box(make_extent({0, 0}, {8, 4}), 100)});
  CHECK(s.message().find("byte offset 100 is not a multiple of 4096") != std::string::npos);
  s = b.add_tensor(w, {box(make_extent({0}, {8}), 0)});
  CHECK(s.message().find("has 1 dimensions, the tensor 2") != std::string::npos);
  BoxSource unknown = box(make_extent({0, 0}, {8, 4}), 0);
  unknown.file = 9;
  s = b.add_tensor(w, {unknown});
  CHECK(s.message().find("unknown file 9") != std::string::npos);
  s = b.add_tensor({"big", DType::kFloat32, std::vector<int64_t>(9, 1), Placement::kWhole}, {});
  CHECK(s.message().find("9 dimensions") != std::string::npos);
  // Nothing of a refused tensor was kept: w can still be added, once.
  REQUIRE(b.add_tensor(w, {box(make_extent({0, 0}, {8, 4}), 4096)}).is_ok());
  s = b.add_tensor(w, {});
  CHECK(s.message() == "tensor \"w\": added twice");
  const GlobalIndex x = std::move(b).finish();
  CHECK(x.tensor_count() == 1);
  CHECK(decode_index(encode_index(x), "INDEX").is_ok());
}

}  // namespace
}  // namespace ckpt::store::index_test
