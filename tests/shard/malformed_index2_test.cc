// Index version 2, byte by byte as docs/format.md §8 lays it out: a head written here from the
// spec (not by encode_index) must be what encode_index writes for the same index, and every kind
// of malformed head or record table is refused with a Status that names the file and the fault.
#include <catch2/catch.hpp>
#include <cstdio>
#include <functional>

#include "ckpt/base/hash.h"
#include "ckpt/store/box_index.h"

namespace ckpt::store::malformed_index2_test {
namespace {

const char* const kWhere = "run/step-000000000007/INDEX";

void put32(std::string* s, uint32_t v) {
  for (int i = 0; i < 4; ++i) s->push_back(static_cast<char>(v >> (8 * i)));
}
void put64(std::string* s, uint64_t v) {
  for (int i = 0; i < 8; ++i) s->push_back(static_cast<char>(v >> (8 * i)));
}
void set(std::string* s, size_t at, int n, uint64_t v) {
  for (int i = 0; i < n; ++i) (*s)[at + i] = static_cast<char>(v >> (8 * i));
}
uint64_t get(const std::string& s, size_t at, int n) {
  uint64_t v = 0;
  for (int i = 0; i < n; ++i) v |= uint64_t{static_cast<unsigned char>(s[at + i])} << (8 * i);
  return v;
}
std::string bytes(std::initializer_list<int> b) {
  std::string s;
  for (int x : b) s.push_back(static_cast<char>(x));
  return s;
}

// An index version 2 file from its parts, as the spec says: header, directory, records.
struct Parts {
  uint32_t tensors = 2, boxes = 5, files = 2, grids = 2;
  uint64_t step = 7;
  std::string files_table = bytes({2});  // rank-00000.h5, rank-00001.h5
  // grid 0: [8, 4], cut every 4 rows, every 4 columns; grid 1: [2, 4], every row, every 2 columns.
  std::string grids_table = bytes({2, 8, 4, 0, 4, 0, 4, 2, 2, 4, 0, 1, 0, 2});
  // "a" float32 (8) sharded (2) on grid 0, one box per cell; "b" int64 (5) flat (3) on grid 1,
  // listed (1): 3 boxes, of cells 0..1 (row 0), 2 and 3.
  std::string tensors_table =
      bytes({0, 1, 'a', 8, 2, 0, 0}) + bytes({0, 1, 'b', 5, 3, 1, 1, 3, 0, 1, 2, 0, 1, 0});
  std::string records;

  Parts() {
    for (auto [file, page, h] : {std::tuple<uint32_t, uint32_t, uint64_t>{0, 1, 0xa0},
                                 {1, 1, 0xa1},
                                 {0, 2, 0xb0},
                                 {1, 2, 0xb1},
                                 {1, 3, 0xb2}}) {
      put32(&records, file);
      put32(&records, page);
      put64(&records, h);
    }
  }
  std::string directory() const { return files_table + grids_table + tensors_table; }
  std::string encode() const {
    const std::string dir = directory();
    std::string s = "CKPTINDX";
    put32(&s, 2);
    put32(&s, 64);
    put32(&s, tensors);
    put32(&s, boxes);
    put32(&s, files);
    put32(&s, grids);
    put64(&s, 64 + dir.size());
    put64(&s, step);
    put64(&s, xxh3_64(records.data(), records.size()));
    put64(&s, xxh3_64(dir.data(), dir.size()));
    return s + dir + records;
  }
};

// Both hashes made right again, so the structural check is the one that answers.
void rehash(std::string* s) {
  const uint64_t head = get(*s, 32, 8);
  if (head < 64 || head > s->size()) return;
  set(s, 48, 8, xxh3_64(s->data() + head, s->size() - head));
  set(s, 56, 8, xxh3_64(s->data() + 64, head - 64));
}

TEST_CASE("box index v2: the spec's bytes are what encode_index writes", "[shard]") {
  IndexBuilder b(7);
  const uint32_t f0 = *b.add_file("rank-00000.h5"), f1 = *b.add_file("rank-00001.h5");
  auto box = [&](Extent e, uint32_t f, const char* ds, uint64_t page, uint64_t h) {
    BoxSource s;
    s.extent = e;
    s.file = f;
    s.dataset = *b.intern(ds);
    s.offset = page * 4096;
    s.xxh3 = h;
    return s;
  };
  REQUIRE(b.add_tensor({"a", DType::kFloat32, {8, 4}, Placement::kSharded},
                       {box(make_extent({0, 0}, {4, 4}), f0, "a", 1, 0xa0),
                        box(make_extent({4, 0}, {4, 4}), f1, "a", 1, 0xa1)})
              .is_ok());
  REQUIRE(b.add_tensor({"b", DType::kInt64, {2, 4}, Placement::kFlat},
                       {box(make_extent({0, 0}, {1, 4}), f0, "b", 2, 0xb0),
                        box(make_extent({1, 0}, {1, 2}), f1, "b", 2, 0xb1),
                        box(make_extent({1, 2}, {1, 2}), f1, "b", 3, 0xb2)})
              .is_ok());
  const GlobalIndex x = std::move(b).finish();
  REQUIRE(static_cast<int>(DType::kFloat32) == 8);
  REQUIRE(static_cast<int>(DType::kInt64) == 5);
  CHECK(encode_index(x) == Parts().encode());
  auto decoded = decode_index(Parts().encode(), kWhere);
  INFO(decoded.status().to_string());
  REQUIRE(decoded.is_ok());
  CHECK_FALSE(decoded->tensor(1).cell_aligned);
  CHECK(decoded->box_extent(1, 4) == make_extent({1, 2}, {1, 2}));
  CHECK(decoded->file_name(decoded->box(4).file) == "rank-00001.h5");
  CHECK(decoded->box(4).xxh3 == 0xb2);
  CHECK(decoded->box_offset(4) == 3 * 4096);
}

struct Case {
  const char* what;
  std::function<void(Parts*)> parts;      // damage to the parts, then encoded
  std::function<void(std::string*)> raw;  // or to the bytes, then rehashed (when `rehash`)
  bool rehash;
  const char* expect;
  Code code = Code::kCorrupt;
};

TEST_CASE("box index v2: every malformed input is refused naming the file and the fault",
          "[shard]") {
  const std::vector<Case> cases = {
      {"newer version", nullptr, [](std::string* s) { set(s, 8, 4, 3); }, false,
       "box index version 3", Code::kUnsupported},
      {"header size", nullptr, [](std::string* s) { set(s, 12, 4, 32); }, false, "header size 32"},
      {"head shorter than the header", nullptr, [](std::string* s) { set(s, 32, 8, 10); }, false,
       "shorter than itself"},
      {"a record too many", nullptr, [](std::string* s) { s->append(16, '\0'); }, true,
       "16-byte box records, not the file's"},
      {"a byte short", nullptr, [](std::string* s) { s->pop_back(); }, true, "not the file's"},
      {"flipped directory byte", nullptr, [](std::string* s) { (*s)[70] ^= 1; }, false,
       "directory hash mismatch"},
      {"flipped record byte", nullptr, [](std::string* s) { (*s)[s->size() - 1] ^= 1; }, false,
       "box records hash mismatch"},
      {"unknown file table", [](Parts* p) { p->files_table = bytes({7}); }, nullptr, false,
       "unknown file table kind 7"},
      {"files by name, twice",
       [](Parts* p) {
         p->files_table = bytes({0, 0, 1, 'x', 1, 0});  // "x", then "x" again
       },
       nullptr, false, "file \"x\" is listed twice"},
      {"too many files", [](Parts* p) { p->files = 1u << 21; }, nullptr, false,
       "names 2097152 files for 5 boxes"},
      {"more grids than tensors", [](Parts* p) { p->grids = 3; }, nullptr, false,
       "3 grids for 2 tensors"},
      {"a grid of 9 dimensions", [](Parts* p) { p->grids_table[0] = 9; }, nullptr, false,
       "grid 0 has 9 dimensions"},
      {"a step of 0", [](Parts* p) { p->grids_table[4] = 0; }, nullptr, false, "is 0 or past 2^63"},
      {"an unknown cut kind", [](Parts* p) { p->grids_table[3] = 5; }, nullptr, false,
       "unknown cut kind 5"},
      {"blocks that do not fit",
       [](Parts* p) {
         p->grids_table = bytes({2, 8, 4, 1, 3, 4, 0, 4}) + p->grids_table.substr(7);
       },
       nullptr, false, "blocks of 3 cut every 4 do not fit an extent of 8"},
      {"a step past the extent", [](Parts* p) { p->grids_table[4] = 9; }, nullptr, false,
       "step 9 exceeds the extent 8"},
      {"a cut list outside the extent",
       [](Parts* p) {
         p->grids_table = p->grids_table.substr(0, 7) + bytes({2, 2, 4, 0, 1, 2, 1, 5});
       },
       nullptr, false, "cut 5 is not strictly between 0 and 4"},
      {"a varint of 11 bytes",
       [](Parts* p) { p->grids_table = bytes({2}) + std::string(11, '\xff'); }, nullptr, false,
       "a varint longer than 64 bits"},
      {"names out of order", [](Parts* p) { std::swap(p->tensors_table[2], p->tensors_table[9]); },
       nullptr, false, "tensor \"a\": out of name order"},
      {"a name listed twice", [](Parts* p) { p->tensors_table[9] = 'a'; }, nullptr, false,
       "tensor \"a\": listed twice"},
      {"a prefix longer than the name before", [](Parts* p) { p->tensors_table[7] = 5; }, nullptr,
       false, "shares 5 bytes with a 1-byte string"},
      {"unknown dtype", [](Parts* p) { p->tensors_table[3] = static_cast<char>(200); }, nullptr,
       false, "unknown dtype code 200"},
      {"unknown placement", [](Parts* p) { p->tensors_table[4] = 9; }, nullptr, false,
       "unknown placement code 9"},
      {"unknown grid", [](Parts* p) { p->tensors_table[5] = 5; }, nullptr, false, "grid 5 of 2"},
      {"unknown layout bits", [](Parts* p) { p->tensors_table[6] = 4; }, nullptr, false,
       "unknown layout bits 4"},
      {"cells past the box count",
       [](Parts* p) {
         p->boxes = 1;
         p->records.resize(16);
       },
       nullptr, false, "pass the header's box count"},
      {"fewer boxes than the header says",
       [](Parts* p) {
         p->boxes = 6;
         p->records.append(16, '\0');
       },
       nullptr, false, "the tensors hold 5 boxes, the header says 6"},
      {"a listed box outside the grid", [](Parts* p) { p->tensors_table[19] = 5; }, nullptr, false,
       "box 2 is outside the tensor's 4 cells"},
      {"listed boxes out of cell order", [](Parts* p) { p->tensors_table[17] = 0; }, nullptr, false,
       "box 1: out of cell order"},
      {"a listed box's corners reversed",
       [](Parts* p) {
         p->tensors_table[17] = 1;  // box 1: cells 1 .. 2, (0, 1) .. (1, 0)
         p->tensors_table[18] = 1;
       },
       nullptr, false, "box 1: its first cell 1 is past its last cell 2 along dimension 1"},
      {"trailing bytes in the head", [](Parts* p) { p->tensors_table.push_back(0); }, nullptr,
       false, "1 trailing bytes in the head"},
      {"a record of an unknown file", [](Parts* p) { p->records[0] = 5; }, nullptr, false,
       "tensor \"a\": box 0: file 5 of 2"},
      {"two boxes' bytes overlap", [](Parts* p) { p->records[16 * 2 + 4] = 1; }, nullptr, false,
       "file \"rank-00000.h5\": the bytes of tensor \"a\" box [0:4, 0:4] [4096, 4160) overlap "
       "those of tensor \"b\" box [0:1, 0:4] at 4096"},
  };
  for (const Case& c : cases) {
    Parts p;
    if (c.parts) c.parts(&p);
    std::string bad = p.encode();
    if (c.raw) c.raw(&bad);
    if (c.rehash) rehash(&bad);
    auto r = decode_index(bad, kWhere);
    INFO(c.what << ": " << r.status().to_string());
    REQUIRE_FALSE(r.is_ok());
    CHECK(r.status().code() == c.code);
    CHECK(r.status().message().rfind(std::string(kWhere) + ": ", 0) == 0);
    CHECK(r.status().message().find(c.expect) != std::string::npos);
  }
}

TEST_CASE("box index v2: every truncation is refused, the head's too", "[shard]") {
  const std::string good = Parts().encode();
  const uint64_t head = get(good, 32, 8);
  for (size_t n = 0; n < good.size(); ++n) {
    INFO("length " << n);
    auto r = decode_index(good.substr(0, n), kWhere);
    REQUIRE_FALSE(r.is_ok());
    CHECK(r.status().code() == Code::kCorrupt);
    if (n >= 64 && n < head) {
      std::string cut = good.substr(0, n);
      set(&cut, 32, 8, n);  // a head that claims to end there
      rehash(&cut);
      CHECK_FALSE(decode_index_head(cut, kWhere).is_ok());
    }
  }
}

TEST_CASE("box index v2: any bit changed, hashes fixed up, decodes or is refused cleanly",
          "[shard]") {
  // A cheap in-test fuzz of the structure checks: under the sanitized build an out-of-bounds
  // read or an overflow here fails the test. What decodes encodes to bytes that decode to it.
  const std::string good = Parts().encode();
  size_t refused = 0, decoded = 0;
  for (size_t i = 16; i < good.size(); ++i) {
    if (i >= 48 && i < 64) continue;  // the hashes themselves
    for (int bit = 0; bit < 8; ++bit) {
      std::string bad = good;
      bad[i] ^= static_cast<char>(1 << bit);
      rehash(&bad);
      auto r = decode_index(bad, kWhere);
      if (!r.is_ok()) {
        ++refused;
        CHECK((r.status().code() == Code::kCorrupt || r.status().code() == Code::kUnsupported));
        continue;
      }
      ++decoded;
      const std::string again = encode_index(*r);
      auto r2 = decode_index(again, kWhere);
      REQUIRE(r2.is_ok());
      CHECK(encode_index(*r2) == again);
    }
  }
  CHECK(refused > 0);
  CHECK(decoded > 0);
}

// The fuzz target's seeds (fixtures/fuzz_seeds/index/make_seeds.py writes them from the spec,
// hashes left zero): once hashed as the target hashes them, each decodes, and the version-2
// seed is the bytes above.
TEST_CASE("box index: the fuzz seeds are valid indexes of each version", "[shard]") {
  for (const char* name : {"v1.INDEX", "v2.INDEX"}) {
    std::FILE* f = std::fopen(
        (std::string(CKPT_SOURCE_DIR) + "/fixtures/fuzz_seeds/index/" + name).c_str(), "rb");
    REQUIRE(f != nullptr);
    std::string s;
    for (int c = std::fgetc(f); c != EOF; c = std::fgetc(f)) s.push_back(static_cast<char>(c));
    std::fclose(f);
    INFO(name);
    if (s[8] == 2) {
      rehash(&s);
      CHECK(s == Parts().encode());
    } else {
      set(&s, 56, 8, xxh3_64(s.data() + 64, s.size() - 64));
    }
    auto r = decode_index(s, name);
    INFO(r.status().to_string());
    REQUIRE(r.is_ok());
    CHECK(r->box_count() == 5);
    CHECK(r->box_extent(1, 4) == make_extent({1, 2}, {1, 2}));
  }
}

}  // namespace
}  // namespace ckpt::store::malformed_index2_test
