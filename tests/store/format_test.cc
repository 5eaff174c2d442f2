#include <catch2/catch.hpp>

#include "ckpt/base/hash.h"
#include "ckpt/format/manifest.h"

namespace ckpt::format_test {
namespace {

Manifest sample() {
  Manifest m;
  m.file = "rank-00000.h5";
  m.file_bytes = 3 * 4096;
  m.step = 12;
  m.attrs_xxh3 = 0x1234;
  m.tensors.push_back({"/model/a", DType::kFloat32, {2, 3}, 4096, 24, 0xabc, std::nullopt, 0, {}});
  m.tensors.push_back({"/model/b", DType::kBFloat16, {4}, 8192, 8, 0xdef, std::nullopt, 0, {}});
  m.tensors.push_back(
      {"/model/empty", DType::kFloat32, {0}, 0, 0, xxh3_64("", 0), std::nullopt, 0, {}});
  return m;
}

TEST_CASE("manifest round trip", "[format]") {
  Manifest m = sample();
  auto back = decode_manifest(encode_manifest(m), "m.json");
  REQUIRE(back.is_ok());
  REQUIRE(back->tensors.size() == 3);
  REQUIRE(back->tensors[1].dtype == DType::kBFloat16);
  REQUIRE(back->tensors[1].shape == std::vector<int64_t>{4});
  REQUIRE(back->tensors[0].xxh3 == 0xabc);
  REQUIRE(back->attrs_xxh3 == 0x1234);
}

TEST_CASE("manifest file_xxh3: optional, round trips, strictly spelled", "[format]") {
  Manifest m = sample();
  auto old = decode_manifest(encode_manifest(m), "m.json");
  REQUIRE(old.is_ok());
  REQUIRE_FALSE(old->file_xxh3.has_value());  // a manifest from before the field
  REQUIRE(encode_manifest(m).find("file_xxh3") == std::string::npos);
  m.file_xxh3 = 0x00c0ffee12345678ull;
  const std::string text = encode_manifest(m);
  auto back = decode_manifest(text, "m.json");
  REQUIRE(back.is_ok());
  REQUIRE(back->file_xxh3 == m.file_xxh3);
  std::string upper = text;
  upper.replace(upper.find("00c0ffee12345678"), 16, "00C0FFEE12345678");
  auto bad = decode_manifest(upper, "m.json");
  REQUIRE(bad.status().code() == Code::kCorrupt);
  REQUIRE(bad.status().message().find("file_xxh3") != std::string::npos);
}

TEST_CASE("manifest chunk digests: optional, round trip, checked against the tensor", "[format]") {
  Manifest m = sample();
  m.file_bytes = 4096 + 3 * 8192;
  m.tensors.resize(1);
  m.tensors[0].shape = {3, 4096};  // 12 KiB in 8 KiB chunks: two digests
  m.tensors[0].dtype = DType::kUInt8;
  m.tensors[0].nbytes = 3 * 4096;
  m.tensors[0].chunk_bytes = 8192;
  m.tensors[0].chunk_xxh3 = {0x0123456789abcdefull, 0x1ull};
  const std::string text = encode_manifest(m);
  auto back = decode_manifest(text, "m.json");
  REQUIRE(back.is_ok());
  CHECK(back->tensors[0].chunk_bytes == 8192);
  CHECK(back->tensors[0].chunk_xxh3 == m.tensors[0].chunk_xxh3);
  CHECK(encode_manifest(sample()).find("chunks") == std::string::npos);  // none when unset
  auto refused = [&](Manifest bad) {
    auto r = decode_manifest(encode_manifest(bad), "m.json");
    REQUIRE(r.status().code() == Code::kCorrupt);
    return r.status().message();
  };
  Manifest few = m;
  few.tensors[0].chunk_xxh3.pop_back();
  CHECK(refused(few) == "m.json: tensor \"/model/a\": 1 chunk digests, 2 chunks of 8192 bytes");
  Manifest odd = m;
  odd.tensors[0].chunk_bytes = 6000;
  CHECK(refused(odd).find("chunk size 6000 is not a multiple of 4096") != std::string::npos);
  Manifest whole = m;
  whole.tensors[0].chunk_bytes = 3 * 4096;  // one chunk: the tensor's own digest says it all
  whole.tensors[0].chunk_xxh3 = {1};
  CHECK(refused(whole).find("below the tensor's 12288 bytes") != std::string::npos);
  std::string upper = text;
  upper.replace(upper.find("0123456789abcdef"), 16, "0123456789ABCDEF");
  auto bad = decode_manifest(upper, "m.json");
  REQUIRE(bad.status().code() == Code::kCorrupt);
  CHECK(bad.status().message().find("chunk digest") != std::string::npos);
}

TEST_CASE("manifest rejects extents that break the rules", "[format]") {
  SECTION("misaligned") {
    Manifest m = sample();
    m.tensors[0].offset = 4100;
    auto r = decode_manifest(encode_manifest(m), "m.json");
    REQUIRE(r.status().message().find("not 4096-aligned") != std::string::npos);
  }
  SECTION("past the end") {
    Manifest m = sample();
    m.tensors[1].offset = 3 * 4096;
    auto r = decode_manifest(encode_manifest(m), "m.json");
    REQUIRE(r.status().message().find("runs past") != std::string::npos);
  }
  SECTION("overlap") {
    Manifest m = sample();
    m.tensors[1].offset = 4096;
    m.tensors[0].shape = {2000};
    m.tensors[0].nbytes = 8000;
    auto r = decode_manifest(encode_manifest(m), "m.json");
    REQUIRE(r.status().message().find("overlap") != std::string::npos);
  }
  SECTION("nbytes disagrees with shape") {
    Manifest m = sample();
    m.tensors[0].nbytes = 28;
    auto r = decode_manifest(encode_manifest(m), "m.json");
    REQUIRE(r.status().message().find("does not match shape") != std::string::npos);
  }
  SECTION("absurd shape overflows") {
    Manifest m = sample();
    m.tensors[0].shape = {1ll << 40, 1ll << 40};
    auto r = decode_manifest(encode_manifest(m), "m.json");
    REQUIRE_FALSE(r.is_ok());
  }
  SECTION("not json") {
    auto r = decode_manifest("{\"format\": ", "m.json");
    REQUIRE(r.status().code() == Code::kCorrupt);
    REQUIRE(r.status().message().rfind("m.json: ", 0) == 0);
  }
}

TEST_CASE("commit record regions_xxh3: optional, round trips", "[format]") {
  CommitRecord c;
  c.step = 3;
  c.time = "2026-12-01T14:00:00Z";
  c.components = {"model"};
  c.files = {{"rank-00000.h5", 8192, 0x42, 0x1234abcdULL}, {"rank-00000.manifest.json", 900, 7}};
  const std::string text = encode_commit(c);
  REQUIRE(text.find("\"regions_xxh3\": \"000000001234abcd\"") != std::string::npos);
  auto back = decode_commit(text, "COMMIT.json");
  REQUIRE(back.is_ok());
  REQUIRE(back->files.at(0).regions_xxh3 == std::optional<uint64_t>(0x1234abcdULL));
  REQUIRE_FALSE(back->files.at(1).regions_xxh3.has_value());
  Manifest m;
  m.file = "rank-00000.h5";
  m.regions_xxh3 = 0xfeedULL;
  auto mb = decode_manifest(encode_manifest(m), "m.json");
  REQUIRE(mb.is_ok());
  REQUIRE(mb->regions_xxh3 == std::optional<uint64_t>(0xfeedULL));
  m.regions_xxh3.reset();
  REQUIRE(encode_manifest(m).find("regions_xxh3") == std::string::npos);
}

TEST_CASE("commit record detects any damage to its body", "[format]") {
  CommitRecord c;
  c.step = 25;
  c.time = "2026-11-29T09:00:00Z";
  c.components = {"model", "optimizer"};
  c.files = {{"rank-00000.h5", 8192, 0x42}};
  const std::string text = encode_commit(c);
  auto back = decode_commit(text, "COMMIT.json");
  REQUIRE(back.is_ok());
  REQUIRE(back->files.at(0).xxh3 == 0x42);
  // Flip every bit of every byte: each flip is caught (parse error, hash or field error).
  size_t caught = 0, flips = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    for (int b = 0; b < 8; ++b) {
      std::string bad = text;
      bad[i] = static_cast<char>(bad[i] ^ (1 << b));
      ++flips;
      auto r = decode_commit(bad, "COMMIT.json");
      // A flip inside insignificant whitespace can leave an equivalent document.
      if (!r.is_ok() || (r->step == c.step && r->files.at(0).xxh3 == 0x42 &&
                         r->files.at(0).name == "rank-00000.h5" && r->components == c.components)) {
        ++caught;
      }
    }
  }
  REQUIRE(caught == flips);
}

TEST_CASE("step directory names", "[format]") {
  REQUIRE(step_dir_name(12000) == "step-000000012000");
  int64_t s = 0;
  REQUIRE(parse_step_dir_name("step-000000012000", &s));
  REQUIRE(s == 12000);
  REQUIRE_FALSE(parse_step_dir_name("step-12000", &s));
  REQUIRE_FALSE(parse_step_dir_name("step-00000001200x", &s));
  REQUIRE(rank_file_name(3) == "rank-00003.h5");
}

}  // namespace
}  // namespace ckpt::format_test
