// Zip bombs (issue 8, item 8): entries that share one deflate stream are refused when the
// directory is read, inflation streams in bounded chunks instead of buffering the claimed size,
// and the bytes one reader inflates over its lifetime are capped.
#include <zlib.h>

#include <catch2/catch.hpp>
#include <cstring>
#include <string>

#include "tests/verify/zip_writer.h"
#include "verify/zip/zip_reader.h"

using namespace ckpt;
using namespace ckpt::verify;
using ckpt::verify::testing::put16;
using ckpt::verify::testing::put32;

namespace {

std::string deflate_raw(const std::string& in) {
  z_stream zs;
  std::memset(&zs, 0, sizeof zs);
  REQUIRE(deflateInit2(&zs, 9, Z_DEFLATED, -MAX_WBITS, 9, Z_DEFAULT_STRATEGY) == Z_OK);
  std::string out(deflateBound(&zs, in.size()), '\0');
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  zs.avail_in = static_cast<uInt>(in.size());
  zs.next_out = reinterpret_cast<Bytef*>(out.data());
  zs.avail_out = static_cast<uInt>(out.size());
  REQUIRE(deflate(&zs, Z_FINISH) == Z_STREAM_END);
  out.resize(zs.total_out);
  deflateEnd(&zs);
  return out;
}

void local_header(std::string& out, const std::string& name, uint32_t crc, uint32_t csize,
                  uint32_t size) {
  put32(out, 0x04034b50);
  put16(out, 20);
  put16(out, 0);
  put16(out, 8);
  put16(out, 0);
  put16(out, 0);
  put32(out, crc);
  put32(out, csize);
  put32(out, size);
  put16(out, static_cast<uint32_t>(name.size()));
  put16(out, 0);
  out += name;
}

void central_entry(std::string& cd, const std::string& name, uint32_t crc, uint32_t csize,
                   uint32_t size, uint32_t offset) {
  put32(cd, 0x02014b50);
  put16(cd, 20);
  put16(cd, 20);
  put16(cd, 0);
  put16(cd, 8);
  put16(cd, 0);
  put16(cd, 0);
  put32(cd, crc);
  put32(cd, csize);
  put32(cd, size);
  put16(cd, static_cast<uint32_t>(name.size()));
  put16(cd, 0);
  put16(cd, 0);
  put16(cd, 0);
  put16(cd, 0);
  put32(cd, 0);
  put32(cd, offset);
  cd += name;
}

void end_record(std::string& out, size_t count, size_t cd_size, size_t cd_offset) {
  put32(out, 0x06054b50);
  put16(out, 0);
  put16(out, 0);
  put16(out, static_cast<uint32_t>(count));
  put16(out, static_cast<uint32_t>(count));
  put32(out, static_cast<uint32_t>(cd_size));
  put32(out, static_cast<uint32_t>(cd_offset));
  put16(out, 0);
}

// One deflated member `a/data/0` holding `plain`, whose directory entry claims `claimed` bytes,
// listed `copies` times in the central directory (all pointing at the same local header).
std::string bomb(const std::string& plain, uint32_t claimed, int copies) {
  const std::string packed = deflate_raw(plain);
  const uint32_t crc = crc32_update(0, plain.data(), plain.size());
  std::string out;
  local_header(out, "a/data/0", crc, static_cast<uint32_t>(packed.size()), claimed);
  out += packed;
  std::string cd;
  for (int k = 0; k < copies; ++k) {
    central_entry(cd, "a/data/" + std::to_string(k), crc, static_cast<uint32_t>(packed.size()),
                  claimed, 0);
  }
  const size_t cd_offset = out.size();
  out += cd;
  end_record(out, copies, cd.size(), cd_offset);
  return out;
}

}  // namespace

TEST_CASE("2,000 directory entries sharing one deflate stream are refused at open", "[verify]") {
  auto f = memory_file("zip_bomb.pt", bomb(std::string(1 << 16, '\0'), 1 << 16, 2000));
  auto z = ZipReader::open(*f);
  REQUIRE_FALSE(z.is_ok());
  CHECK(z.status().code() == Code::kCorrupt);
  CHECK(z.status().message().find("overlap") != std::string::npos);
  // A scanner may still list them (lenient), but the total it inflates stays capped.
  ZipLimits lenient;
  lenient.lenient = true;
  lenient.max_total_inflated = 1 << 20;
  auto zl = ZipReader::open(*f, lenient);
  REQUIRE(zl.is_ok());
  REQUIRE(zl->entries().size() == 2000);
  int ok = 0;
  Status last;
  for (const auto& e : zl->entries()) {
    last = zl->stream_record(e, [](const char*, size_t) { return Status::ok(); });
    if (!last.is_ok()) break;
    ++ok;
  }
  CHECK(ok == 16);  // 16 × 64 KiB = the 1 MiB cap
  CHECK(last.message().find("cap") != std::string::npos);
}

TEST_CASE("inflation streams in bounded chunks, whatever the record claims", "[verify]") {
  const std::string plain(48u << 20, '\0');  // 48 MiB of zeros deflate to ~48 KiB
  auto f = memory_file("deflate_bomb.pt", bomb(plain, static_cast<uint32_t>(plain.size()), 1));
  auto z = ZipReader::open(*f);
  REQUIRE(z.is_ok());
  size_t largest = 0;
  uint64_t total = 0;
  uint32_t crc = 0;
  Status s = z->stream_record(z->entries()[0], [&](const char* p, size_t n) {
    largest = std::max(largest, n);
    total += n;
    crc = crc32_update(crc, p, n);
    return Status::ok();
  });
  REQUIRE(s.is_ok());
  CHECK(total == plain.size());
  CHECK(largest <= (1u << 20));
  CHECK(crc == z->entries()[0].crc32);

  // A directory that claims 1 GiB for the same stream: no 1 GiB buffer, a clear error.
  auto lie = memory_file("lie.pt", bomb(std::string(1 << 20, '\0'), 1u << 30, 1));
  auto zl = ZipReader::open(*lie);
  REQUIRE(zl.is_ok());
  auto r = zl->read_record(zl->entries()[0]);
  REQUIRE_FALSE(r.is_ok());
  CHECK(r.status().message().find("deflate stream is corrupt") != std::string::npos);
}
