// The zip directory reader: torch.save archives written by torch 1.13, ZIP record offsets and
// CRC-32, unsafe names, and proof that a metadata-only audit reads no tensor bytes.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>

#include "ckpt/io/env.h"
#include "tests/common/test_readers.h"
#include "tests/verify/zip_writer.h"
#include "verify/audit/audit.h"
#include "verify/pickle/pickle_reader.h"
#include "verify/zip/zip_reader.h"

using namespace ckpt;
using namespace ckpt::verify;
namespace fs = std::filesystem;

namespace {
const fs::path kForeign = fs::path(CKPT_SOURCE_DIR) / "fixtures" / "foreign";

fs::path write_temp(const std::string& name, const std::string& bytes) {
  fs::path p =
      fs::temp_directory_path() / ("ckpt_verify_" + std::to_string(::getpid()) + "_" + name);
  std::ofstream(p, std::ios::binary) << bytes;
  return p;
}
}  // namespace

TEST_CASE("zip reader lists a real torch.save archive and reads data.pkl", "[verify]") {
  auto f = Env::posix()->open_random((kForeign / "torch" / "complete.pt").string());
  REQUIRE(f.is_ok());
  auto z = ZipReader::open(**f);
  REQUIRE(z.is_ok());
  CHECK(z->prefix() == "complete");
  const ZipEntry* pkl = z->find("complete/data.pkl");
  REQUIRE(pkl != nullptr);
  auto bytes = z->read_record(*pkl);
  REQUIRE(bytes.is_ok());
  CHECK(bytes->substr(0, 2) == "\x80\x02");
  CHECK(crc32_update(0, bytes->data(), bytes->size()) == pkl->crc32);
  const ZipEntry* d0 = z->find("complete/data/0");
  REQUIRE(d0 != nullptr);
  auto off = z->data_offset(*d0);
  REQUIRE(off.is_ok());
  CHECK(*off % 64 == 0);  // torch pads local headers so storages are 64-byte aligned
  CHECK(z->find("complete/version") != nullptr);
}

TEST_CASE("zip reader rejects unsafe names, bad signatures and out-of-file offsets", "[verify]") {
  CHECK(zip_name_is_safe("archive/data/0"));
  CHECK_FALSE(zip_name_is_safe("../evil"));
  CHECK_FALSE(zip_name_is_safe("a/../../b"));
  CHECK_FALSE(zip_name_is_safe("/etc/passwd"));
  CHECK_FALSE(zip_name_is_safe("a\\b"));
  CHECK(zip_name_is_safe("a/..b"));

  auto slip = memory_file("slip.pt", testing::make_zip({{"a/data.pkl", "x"}, {"../evil", "y"}}));
  auto z = ZipReader::open(*slip);
  REQUIRE_FALSE(z.is_ok());
  CHECK(z.status().message().find("../evil") != std::string::npos);

  std::string good = testing::make_zip({{"a/data.pkl", "hello"}});
  std::string bad_off = good;
  bad_off[bad_off.size() - 6] = '\x7f';  // central directory offset far past the end
  z = ZipReader::open(*memory_file("off.pt", bad_off));
  REQUIRE_FALSE(z.is_ok());
  CHECK(z.status().message().find("outside") != std::string::npos);

  z = ZipReader::open(*memory_file("tiny.pt", "PK\x03\x04"));
  REQUIRE_FALSE(z.is_ok());
}

TEST_CASE("metadata-only audit reads the zip directory and data.pkl, never tensor bytes",
          "[verify]") {
  const uint32_t n = 4u << 20;  // 16 MiB of float32
  std::string pkl = testing::one_tensor_pickle(n, "cpu");
  std::string zip = testing::make_zip({{"big/data.pkl", pkl},
                                       {"big/data/0", std::string(size_t(n) * 4, '\0')},
                                       {"big/version", "3\n"}});
  fs::path p = write_temp("big.pt", zip);
  AuditOptions o;
  auto r = audit_path(test::foreign_readers(), Env::posix(), p.string(), o);
  REQUIRE(r.is_ok());
  CHECK(r->find(AuditComponent::kModel)->status == ComponentStatus::kPresent);
  CHECK(r->bytes_read < 70000);  // EOCD tail + directory + data.pkl, not 16 MiB
  o.deep = true;
  auto deep = audit_path(test::foreign_readers(), Env::posix(), p.string(), o);
  REQUIRE(deep.is_ok());
  CHECK(deep->bytes_read >= uint64_t(n) * 4);
  fs::remove(p);
}

TEST_CASE("audit --deep finds a flipped byte through the record CRC-32", "[verify]") {
  AuditOptions o;
  o.deep = true;
  auto r = audit_path(test::foreign_readers(), Env::posix(),
                      (kForeign / "damaged" / "bitflip.pt").string(), o);
  REQUIRE(r.is_ok());
  CHECK(r->find(AuditComponent::kModel)->status == ComponentStatus::kInconsistent);
  CHECK_FALSE(r->complete);
  o.deep = false;
  r = audit_path(test::foreign_readers(), Env::posix(),
                 (kForeign / "damaged" / "bitflip.pt").string(), o);
  REQUIRE(r.is_ok());
  CHECK(r->find(AuditComponent::kModel)->status == ComponentStatus::kPresent);
}
