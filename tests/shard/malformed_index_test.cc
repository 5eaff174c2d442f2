// decode_index refuses every kind of malformed index version 1 INDEX (what checkpoints written
// before index version 2 hold) with a Status that names the file and what is wrong. Each case
// damages one field of a valid index (and, where the damage is structural, recomputes the body
// hash so the structural check is the one that answers). Version 2: malformed_index2_test.cc.
#include <catch2/catch.hpp>
#include <functional>

#include "ckpt/base/hash.h"
#include "ckpt/store/box_index.h"

namespace ckpt::store::malformed_index_test {
namespace {

const char* const kWhere = "run/step-000000000007/INDEX";

// Two tensors: "a" [8, 4] as two row boxes (uniform cuts), "b" [6] cut at 2 (explicit cuts).
std::string valid_index() {
  IndexBuilder b(7);
  const uint32_t f0 = *b.add_file("rank-00000.h5"), f1 = *b.add_file("rank-00001.h5");
  auto box = [&](Extent e, uint32_t f, const char* ds, uint64_t page) {
    BoxSource s;
    s.extent = e;
    s.file = f;
    s.dataset = *b.intern(ds);
    s.offset = page * 4096;
    s.xxh3 = 0x1234 + page;
    return s;
  };
  REQUIRE(b.add_tensor({"a", DType::kFloat32, {8, 4}, Placement::kSharded},
                       {box(make_extent({0, 0}, {4, 4}), f0, "/a", 1),
                        box(make_extent({4, 0}, {4, 4}), f1, "/a", 1)})
              .is_ok());
  REQUIRE(b.add_tensor(
               {"b", DType::kInt64, {6}, Placement::kFlat},
               {box(make_extent({0}, {2}), f0, "/b", 2), box(make_extent({2}, {4}), f1, "/b", 2)})
              .is_ok());
  return encode_index(std::move(b).finish(), 1);
}

// Byte positions of the sections of valid_index(): 2 tensors, 4 boxes, 8 geometry words,
// 2 files, 6 strings.
constexpr size_t kTensors = 64, kBoxes = kTensors + 2 * 24, kGeom = kBoxes + 4 * 28,
                 kFiles = kGeom + 8 * 8, kStringEnds = kFiles + 2 * 4;

uint64_t get(const std::string& s, size_t at, int n) {
  uint64_t v = 0;
  for (int i = 0; i < n; ++i) v |= uint64_t{static_cast<unsigned char>(s[at + i])} << (8 * i);
  return v;
}
void set(std::string* s, size_t at, int n, uint64_t v) {
  for (int i = 0; i < n; ++i) (*s)[at + i] = static_cast<char>(v >> (8 * i));
}
void rehash(std::string* s) { set(s, 56, 8, xxh3_64(s->data() + 64, s->size() - 64)); }

struct Case {
  const char* what;
  std::function<void(std::string*)> damage;
  bool rehash;
  const char* expect;  // a phrase of the message
  Code code = Code::kCorrupt;
};

TEST_CASE("box index v1: the layout the malformed cases assume", "[shard]") {
  const std::string s = valid_index();
  REQUIRE(get(s, 16, 4) == 2);     // tensors
  REQUIRE(get(s, 20, 4) == 4);     // boxes
  REQUIRE(get(s, 24, 4) == 2);     // files
  REQUIRE(get(s, 28, 4) == 6);     // strings
  REQUIRE(get(s, 32, 4) == 8);     // geometry words
  REQUIRE(get(s, kGeom, 8) == 8);  // a: shape 8, 4; steps 4, 4; b: shape 6; explicit, 1 cut: 2
  REQUIRE(get(s, kGeom + 40, 8) == 0);
  REQUIRE(get(s, kGeom + 56, 8) == 2);
  REQUIRE(decode_index(s, kWhere).is_ok());
}

TEST_CASE("box index v1: every malformed input is refused naming the file and the fault",
          "[shard]") {
  const std::vector<Case> cases = {
      {"bad magic", [](std::string* s) { (*s)[0] = 'X'; }, false, "magic"},
      {"newer version", [](std::string* s) { set(s, 8, 4, 3); }, false, "box index version 3",
       Code::kUnsupported},
      {"header size", [](std::string* s) { set(s, 12, 4, 32); }, false, "header size 32"},
      {"reserved header", [](std::string* s) { set(s, 36, 4, 1); }, false, "reserved header"},
      {"trailing byte", [](std::string* s) { s->push_back('x'); }, true, "1 trailing bytes"},
      {"count past the end", [](std::string* s) { set(s, 20, 4, 1000000); }, true, "truncated"},
      {"huge string table", [](std::string* s) { set(s, 40, 8, ~0ull); }, true, "truncated"},
      {"flipped body byte", [](std::string* s) { (*s)[kBoxes + 3] ^= 1; }, false,
       "body hash mismatch"},
      {"string end past the table", [](std::string* s) { set(s, kStringEnds, 4, 1000); }, true,
       "string 0 ends at 1000"},
      {"strings short of the table", [](std::string* s) { set(s, kStringEnds + 20, 4, 31); }, true,
       "the strings end at 31 but the string table holds 32 bytes"},
      {"file names no string", [](std::string* s) { set(s, kFiles, 4, 99); }, true,
       "file 0 names string 99 of 6"},
      {"file listed twice", [](std::string* s) { set(s, kFiles + 4, 4, 0); }, true,
       "file \"rank-00000.h5\" is listed twice"},
      {"tensor name no string", [](std::string* s) { set(s, kTensors, 4, 77); }, true,
       "tensor 0: name is string 77"},
      {"tensor named twice", [](std::string* s) { set(s, kTensors + 24, 4, get(*s, kTensors, 4)); },
       true, "tensor \"a\" is listed twice"},
      {"unknown dtype", [](std::string* s) { (*s)[kTensors + 16] = char(200); }, true,
       "unknown dtype code 200"},
      {"unknown placement", [](std::string* s) { (*s)[kTensors + 17] = 9; }, true,
       "unknown placement code 9"},
      {"reserved tensor bytes", [](std::string* s) { (*s)[kTensors + 21] = 1; }, true,
       "reserved bytes are not zero"},
      {"too many dimensions", [](std::string* s) { (*s)[kTensors + 18] = 9; }, true,
       "has 9 dimensions"},
      {"box range out of sequence", [](std::string* s) { set(s, kTensors + 24 + 4, 4, 3); }, true,
       "do not follow the previous tensor's"},
      {"boxes of no tensor", [](std::string* s) { set(s, kTensors + 24 + 8, 4, 1); }, true,
       "1 boxes belong to no tensor"},
      {"geometry past the table", [](std::string* s) { set(s, kTensors + 24 + 12, 4, 7); }, true,
       "runs past the geometry table"},
      {"negative extent", [](std::string* s) { set(s, kGeom, 8, 1ull << 63); }, true,
       "negative extent"},
      {"step past the extent", [](std::string* s) { set(s, kGeom + 16, 8, 9); }, true,
       "step 9 exceeds the extent 8"},
      {"cut outside the extent", [](std::string* s) { set(s, kGeom + 56, 8, 6); }, true,
       "cut 6 is not strictly between 0 and 6"},
      {"too many cuts", [](std::string* s) { set(s, kGeom + 48, 8, 6); }, true,
       "6 cuts inside an extent of 6"},
      {"too many elements",
       [](std::string* s) {
         set(s, kGeom, 8, 1ull << 40);
         set(s, kGeom + 8, 8, 1ull << 40);
       },
       true, "more than 2^62 elements"},
      {"too many cells",
       [](std::string* s) {
         set(s, kGeom, 8, 1ull << 20);
         set(s, kGeom + 8, 8, 1ull << 20);
         set(s, kGeom + 16, 8, 1);
         set(s, kGeom + 24, 8, 1);
       },
       true, "more than 2^32 cells"},
      {"box file unknown", [](std::string* s) { set(s, kBoxes, 4, 5); }, true,
       "tensor \"a\": box 0: file 5 of 2"},
      {"box dataset unknown", [](std::string* s) { set(s, kBoxes + 4, 4, 50); }, true,
       "box 0: dataset is string 50 of 6"},
      {"box outside the grid", [](std::string* s) { set(s, kBoxes + 28 + 16, 4, 2); }, true,
       "box 1: cell 2 is outside the tensor's 2 cells"},
      {"box corners reversed", [](std::string* s) { set(s, kBoxes + 12, 4, 1); }, true,
       "box 0: its first cell 1 is past its last cell 0"},
      // Found by fuzz_box_index: a first cell past the grid whose coordinates, taken modulo the
      // grid, do not pass the last cell's (it re-encoded as version 2 to bytes that did not
      // decode).
      {"first cell past the grid", [](std::string* s) { set(s, kBoxes + 28 + 12, 4, 16385); }, true,
       "box 1: its first cell 16385 is past its last cell 1"},
      {"boxes out of order",
       [](std::string* s) {
         const std::string first = s->substr(kBoxes, 28);
         s->replace(kBoxes, 28, s->substr(kBoxes + 28, 28));
         s->replace(kBoxes + 28, 28, first);
       },
       true, "box 1: out of cell order"},
      {"boxes out of order on the last cell",
       [](std::string* s) {
         set(s, kBoxes + 16, 4, 1);       // box 0: cells 0..1
         set(s, kBoxes + 28 + 12, 4, 0);  // box 1: cells 1..1 -> 0..0
         set(s, kBoxes + 28 + 16, 4, 0);
       },
       true, "box 1: out of cell order (first cell 0 after 0)"},
      {"byte extents overlap", [](std::string* s) { set(s, kBoxes + 2 * 28 + 8, 4, 1); }, true,
       "file \"rank-00000.h5\": the bytes of tensor \"a\" box [0:4, 0:4] [4096, 4160) overlap "
       "those of tensor \"b\" box [0:2] at 4096"},
  };
  const std::string good = valid_index();
  for (const Case& c : cases) {
    std::string bad = good;
    c.damage(&bad);
    if (c.rehash) rehash(&bad);
    auto r = decode_index(bad, kWhere);
    INFO(c.what << ": " << r.status().to_string());
    REQUIRE_FALSE(r.is_ok());
    CHECK(r.status().code() == c.code);
    CHECK(r.status().message().rfind(std::string(kWhere) + ": ", 0) == 0);
    CHECK(r.status().message().find(c.expect) != std::string::npos);
  }
}

TEST_CASE("box index v1: blocked cuts that do not fit the extent are refused", "[shard]") {
  // One tensor [22] cut in blocks of 11, every 4 (TP 2 outside FSDP 3): geometry words 22,
  // 2^63 | 11, 4 after one 24-byte tensor and six 28-byte boxes.
  IndexBuilder b;
  const uint32_t f = *b.add_file("rank-00000.h5");
  std::vector<BoxSource> boxes;
  const int64_t cuts[] = {0, 4, 8, 11, 15, 19, 22};
  for (int i = 0; i < 6; ++i) {
    BoxSource s;
    s.extent = make_extent({cuts[i]}, {cuts[i + 1] - cuts[i]});
    s.file = f;
    s.dataset = *b.intern("/t");
    s.offset = 4096 * (i + 1);
    boxes.push_back(s);
  }
  REQUIRE(b.add_tensor({"t", DType::kFloat32, {22}, Placement::kSharded}, boxes).is_ok());
  const std::string good = encode_index(std::move(b).finish(), 1);
  const size_t geom = 64 + 24 + 6 * 28;
  REQUIRE(get(good, geom + 8, 8) == ((1ull << 63) | 11));
  REQUIRE(get(good, geom + 16, 8) == 4);
  REQUIRE(decode_index(good, kWhere).is_ok());
  std::string bad = good;
  set(&bad, geom + 16, 8, 12);
  rehash(&bad);
  CHECK(decode_index(bad, kWhere).status().message() ==
        std::string(kWhere) +
            ": tensor \"t\": dimension 0: blocks of 11 cut every 12 do not fit an extent of 22");
  bad = good;
  set(&bad, geom + 8, 8, 1ull << 63);
  rehash(&bad);
  CHECK(decode_index(bad, kWhere).status().message().find("blocks of 0 cut every 4") !=
        std::string::npos);
  bad = good;
  set(&bad, geom + 8, 8, (1ull << 63) | 23);
  rehash(&bad);
  CHECK(decode_index(bad, kWhere).status().code() == Code::kCorrupt);
}

TEST_CASE("box index v1: every truncation is refused", "[shard]") {
  const std::string good = valid_index();
  for (size_t n = 0; n < good.size(); ++n) {
    auto r = decode_index(good.substr(0, n), kWhere);
    INFO("length " << n);
    REQUIRE_FALSE(r.is_ok());
    CHECK(r.status().code() == Code::kCorrupt);
  }
}

TEST_CASE("box index v1: any byte changed, hash fixed up, decodes or is refused cleanly",
          "[shard]") {
  // A cheap in-test fuzz of the structure checks (every byte, every bit): under the sanitized
  // build an out-of-bounds read or overflow here fails the test.
  const std::string good = valid_index();
  size_t refused = 0;
  for (size_t i = 64; i < good.size(); ++i) {
    for (int bit = 0; bit < 8; ++bit) {
      std::string bad = good;
      bad[i] ^= static_cast<char>(1 << bit);
      rehash(&bad);
      auto r = decode_index(bad, kWhere);
      if (!r.is_ok()) {
        ++refused;
        CHECK(r.status().code() == Code::kCorrupt);
      } else {
        CHECK(encode_index(*r, 1) == bad);  // what decodes is what it encodes back to
      }
    }
  }
  CHECK(refused > 0);
}

}  // namespace
}  // namespace ckpt::store::malformed_index_test
