// `ckpt diff --deep` on torch.distributed.checkpoint folders, through the real `ckpt` executable:
// the fixtures of fixtures/foreign/dcp_diff/ (make_dcp_diff.py: a 2-process FSDP2 run, every
// tensor split into one chunk per rank) differ in exactly one element of one model tensor, in
// DCP's nested layout and in torchtitan's flat one. Damaged copies are made here, in a temp folder.
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "tests/common/run_cli.h"

namespace diff_dcp_test {
namespace {

namespace fs = std::filesystem;
using ckpt_test::quote;
using ckpt_test::Run;
using Copy = ckpt_test::FolderCopy;
using nlohmann::json;

const fs::path kDcp = fs::path(CKPT_SOURCE_DIR) / "fixtures" / "foreign" / "dcp_diff";

// `ckpt diff FLAGS A B`.
Run diff(const std::string& flags, const fs::path& a, const fs::path& b) {
  return ckpt_test::run_ckpt("diff " + flags + " " + quote(a.string()) + " " + quote(b.string()));
}

json diff_json(const std::string& flags, const fs::path& a, const fs::path& b, int* rc) {
  const Run r = diff("--json " + flags, a, b);
  *rc = r.exit_code;
  INFO("stdout: " << r.out << "\nstderr: " << r.err);
  json j = json::parse(r.out, nullptr, false);
  REQUIRE_FALSE(j.is_discarded());
  REQUIRE(j["tensors"]["changed"].is_array());
  return j;
}

TEST_CASE("ckpt diff --deep compares the values of DCP tensors", "[verify]") {
  int rc = -1;
  SECTION("nested layout: one element of 0.weight changed by 0.75 (rank 0's chunk)") {
    json shallow = diff_json("", kDcp / "nested" / "a", kDcp / "nested" / "b", &rc);
    CHECK(rc == 0);  // same names, dtypes and shapes
    CHECK(shallow["tensors"]["changed"].empty());
    json j = diff_json("--deep", kDcp / "nested" / "a", kDcp / "nested" / "b", &rc);
    CHECK(rc == 2);
    CHECK(j["differences"] == 1);
    REQUIRE(j["tensors"]["changed"].size() == 1);
    const json& t = j["tensors"]["changed"][0];
    CHECK(t["name"] == "0.weight");
    CHECK(t["a"] == "float32 [6,4]");
    CHECK(t["b"] == "float32 [6,4]");
    REQUIRE(t["max_abs_diff"].is_number());
    CHECK(t["max_abs_diff"].get<double>() == Approx(0.75).margin(1e-6));
  }
  SECTION("torchtitan's flat model-only layout: one element of 2.weight changed (rank 1's chunk)") {
    json j = diff_json("--deep", kDcp / "titan" / "a", kDcp / "titan" / "b", &rc);
    CHECK(rc == 2);
    CHECK(j["differences"] == 1);
    REQUIRE(j["tensors"]["changed"].size() == 1);
    CHECK(j["tensors"]["changed"][0]["name"] == "2.weight");
    CHECK(j["tensors"]["changed"][0]["a"] == "float32 [2,6]");
    CHECK(j["tensors"]["changed"][0]["max_abs_diff"].get<double>() == Approx(0.75).margin(1e-6));
  }
  SECTION("identical: exit 0, nothing changed, every tensor compared by value") {
    json j = diff_json("--deep", kDcp / "nested" / "a", kDcp / "nested" / "a", &rc);
    CHECK(rc == 0);
    CHECK(j["differences"] == 0);
    CHECK(j["tensors"]["changed"].empty());
    const Run r = diff("--deep", kDcp / "titan" / "a", kDcp / "titan" / "a");
    CHECK(r.exit_code == 0);
    CHECK(r.out.find("4 model tensors (4 equal by value)") != std::string::npos);
  }
  SECTION("the same trained state in two layouts, written by separate saves: equal by value") {
    json j = diff_json("--deep", kDcp / "nested" / "a", kDcp / "titan" / "a", &rc);
    CHECK(rc == 2);  // the model-only save has no optimizer
    CHECK(j["components"]["optimizer"]["a"] == "present");
    CHECK(j["components"]["optimizer"]["b"] == "missing");
    CHECK(j["tensors"]["changed"].empty());
    CHECK(j["tensors"]["only_a"].empty());
    CHECK(j["tensors"]["only_b"].empty());
  }
}

// One line on stderr naming the damaged file, exit 65, never a crash (and no report on stdout).
void check_one_error_line(const Run& r, const std::string& file) {
  INFO("stdout: " << r.out << "\nstderr: " << r.err);
  CHECK(r.exit_code == 65);
  CHECK(r.out.empty());
  REQUIRE_FALSE(r.err.empty());
  CHECK(r.err.find('\n') == r.err.size() - 1);
  CHECK(r.err.find("corrupt") != std::string::npos);
  CHECK(r.err.find(file) != std::string::npos);
}

TEST_CASE("ckpt diff --deep on a damaged .distcp: one clear error line, exit 65", "[verify]") {
  const fs::path good = kDcp / "nested" / "a";
  SECTION("truncated: rank 1's file cut to 20000 of its bytes") {
    Copy c(good, "trunc");
    fs::resize_file(c.root / "__1_0.distcp", 20000);
    const Run r = diff("--deep", good, c.root);
    check_one_error_line(r, "__1_0.distcp");
    CHECK(r.err.find("lie outside the file (20000 bytes)") != std::string::npos);
    CHECK(diff("--deep --json", c.root, good).exit_code == 65);
  }
  SECTION("hostile: rank 0's file overwritten with bytes that are no torch.save blob") {
    Copy c(good, "garbage");
    const fs::path p = c.root / "__0_0.distcp";
    const auto size = fs::file_size(p);
    std::string junk(size, '\0');
    for (size_t i = 0; i < junk.size(); ++i) junk[i] = static_cast<char>((i * 131 + 7) % 251);
    std::ofstream(p, std::ios::binary | std::ios::trunc) << junk;
    REQUIRE(fs::file_size(p) == size);
    const Run r = diff("--deep", good, c.root);
    check_one_error_line(r, "__0_0.distcp");
    CHECK(r.err.find("neither a torch.save blob") != std::string::npos);
  }
  SECTION("chunk blobs with one flipped element byte each: their CRC-32 says so") {
    Copy c(good, "flip");
    const fs::path p = c.root / "__0_0.distcp";
    std::string bytes;
    {
      std::ifstream in(p, std::ios::binary);
      bytes.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    }
    // Each chunk is a torch.save ZIP whose data/0 record holds the elements, followed by its data
    // descriptor or the next header: the byte before that "PK" is the record's last element byte.
    // Only local headers (PK\3\4, the name at +30) are followed, never the central directory.
    int flipped = 0;
    for (size_t rec = bytes.find("/data/0"); rec != std::string::npos;
         rec = bytes.find("/data/0", rec + 1)) {
      const size_t hdr = bytes.rfind(std::string("PK\x03\x04", 4), rec);
      if (hdr == std::string::npos || rec - hdr > 30 + 200) continue;
      const size_t name_len = static_cast<unsigned char>(bytes[hdr + 26]) |
                              static_cast<size_t>(static_cast<unsigned char>(bytes[hdr + 27])) << 8;
      if (hdr + 30 + name_len != rec + 7) continue;
      const size_t next = bytes.find("PK", rec);
      REQUIRE(next != std::string::npos);
      bytes[next - 1] = static_cast<char>(bytes[next - 1] ^ 0x01);
      ++flipped;
    }
    REQUIRE(flipped >= 4);
    std::ofstream(p, std::ios::binary | std::ios::trunc) << bytes;
    const Run r = diff("--deep", good, c.root);
    check_one_error_line(r, "__0_0.distcp");
    CHECK(r.err.find("CRC-32 mismatch") != std::string::npos);
  }
}

}  // namespace

}  // namespace diff_dcp_test
