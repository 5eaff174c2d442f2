// read_dcp_tensor (verify/formats/tensor_bytes.h) on chunk tables built here: raw chunks placed
// into the whole tensor, and every kind of hostile table refused as Corrupt before anything is
// allocated (a shape larger than the files, chunks outside the shape or the file, names that
// leave the folder). The torch.save-blob chunks of real DCP saves are covered through the ckpt
// executable (tests/audit_fixtures/diff_dcp_test.cc) and by `ckpt convert`'s tests.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "verify/formats/tensor_bytes.h"

namespace {

namespace fs = std::filesystem;
using namespace ckpt;
using namespace ckpt::verify;

using Chunks = std::map<std::string, std::vector<DcpChunk>>;

struct Folder {
  Folder() : dir(fs::temp_directory_path() / ("ckpt_dcp_tensor_" + std::to_string(::getpid()))) {
    fs::remove_all(dir);
    fs::create_directories(dir);
    // 12 float32 elements 0..11 (a [3,4] tensor in C order), raw, at offset 0 of x.distcp.
    std::string bytes(48, '\0');
    for (int i = 0; i < 12; ++i) {
      const float f = static_cast<float>(i);
      std::memcpy(&bytes[static_cast<size_t>(i) * 4], &f, 4);
    }
    std::ofstream(dir / "x.distcp", std::ios::binary) << bytes;
  }
  ~Folder() {
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
  fs::path dir;
};

TensorRecord record(std::vector<int64_t> shape) {
  TensorRecord t;
  t.dtype = DType::kFloat32;
  t.element_size = 4;
  t.shape = std::move(shape);
  t.storage_key = "w";
  return t;
}

std::vector<float> floats(const Tensor& x) {
  std::vector<float> out(x.nbytes / 4);
  std::memcpy(out.data(), x.data, x.nbytes);
  return out;
}

TEST_CASE("read_dcp_tensor places raw chunks into the whole tensor", "[verify]") {
  Folder f;
  SECTION("two row chunks, stored in the file in reverse order") {
    // Rows 0-1 are the file's bytes 16..47 (elements 4..11), row 2 its bytes 0..15 (0..3).
    Chunks c{{"w", {{{0, 0}, {2, 4}, "x.distcp", 16, 32}, {{2, 0}, {1, 4}, "x.distcp", 0, 16}}}};
    auto x = read_dcp_tensor(Env::posix(), f.dir.string(), c, record({3, 4}));
    REQUIRE(x.is_ok());
    CHECK(x->nbytes == 48);
    CHECK(floats(*x) == std::vector<float>{4, 5, 6, 7, 8, 9, 10, 11, 0, 1, 2, 3});
  }
  SECTION("two column chunks: each row of a chunk lands at its column offset") {
    // Columns 0-1 from elements 0..5 ([3,2]), columns 2-3 from elements 6..11.
    Chunks c{{"w", {{{0, 0}, {3, 2}, "x.distcp", 0, 24}, {{0, 2}, {3, 2}, "x.distcp", 24, 24}}}};
    auto x = read_dcp_tensor(Env::posix(), f.dir.string(), c, record({3, 4}));
    REQUIRE(x.is_ok());
    CHECK(floats(*x) == std::vector<float>{0, 1, 6, 7, 2, 3, 8, 9, 4, 5, 10, 11});
  }
}

TEST_CASE("read_dcp_tensor refuses hostile chunk tables without allocating them", "[verify]") {
  Folder f;
  const std::string dir = f.dir.string();
  auto refused = [&](const Chunks& c, const TensorRecord& t, const std::string& why) {
    auto x = read_dcp_tensor(Env::posix(), dir, c, t);
    INFO(why);
    REQUIRE_FALSE(x.is_ok());
    INFO(x.status().message());
    CHECK(x.status().code() == Code::kCorrupt);
    CHECK(x.status().message().find(why) != std::string::npos);
  };
  // 2^40 float32 elements (4 TiB) tiled by chunks that all point at the 48-byte file.
  const int64_t huge = int64_t{1} << 40;
  std::vector<DcpChunk> many;
  for (int64_t i = 0; i < 4; ++i) many.push_back({{i * (huge / 4)}, {huge / 4}, "x.distcp", 0, 48});
  refused({{"w", many}}, record({huge}), "more than its chunk files hold");
  refused({{"w", {{{0, 0}, {3, 5}, "x.distcp", 0, 48}}}}, record({3, 4}), "lies outside its shape");
  refused({{"w", {{{0, 0}, {2, 4}, "x.distcp", 0, 32}}}}, record({3, 4}), "do not tile its shape");
  refused({{"w", {{{0}, {12}, "x.distcp", 0, 48}}}}, record({3, 4}), "has the wrong rank");
  refused({{"w", {{{0, 0}, {3, 4}, "../x.distcp", 0, 48}}}}, record({3, 4}),
          "not a plain relative name");
  refused({{"w", {{{0, 0}, {3, 4}, "x.distcp", 8, 48}}}}, record({3, 4}),
          "lie outside the file (48 bytes)");
  refused({{"w", {{{0, 0}, {3, 4}, "x.distcp", 0, 40}}}}, record({3, 4}),
          "nor the 48 raw bytes its shape needs");
  refused({}, record({3, 4}), "has no stored chunks");
  // A chunk file that is not there: the open fails (NotFound), naming it.
  auto gone = read_dcp_tensor(Env::posix(), dir, {{"w", {{{0, 0}, {3, 4}, "y.distcp", 0, 48}}}},
                              record({3, 4}));
  REQUIRE_FALSE(gone.is_ok());
  CHECK(gone.status().message().find("y.distcp") != std::string::npos);
}

}  // namespace
