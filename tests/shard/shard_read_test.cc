// Format version 2 on disk: boxes written by store::write_rank, the INDEX store::commit builds
// from the manifests, and resume::ShardRead restoring them at another layout (docs/format.md §8).
#include <catch2/catch.hpp>
#include <cstdio>
#include <numeric>
#include <vector>

#include "ckpt/format/rank_root.h"
#include "ckpt/h5/rank_file.h"
#include "ckpt/io/env.h"
#include "ckpt/store/commit_index.h"
#include "ckpt/store/rank_io.h"
#include "ckpt/store/run_dir.h"
#include "resume/reshard_read.h"
#include "tests/common/test_util.h"

namespace ckpt::shard_read_test {
namespace {

constexpr int64_t kRows = 12, kCols = 4;

std::vector<float> global_values() {
  std::vector<float> v(kRows * kCols);
  std::iota(v.begin(), v.end(), 0.0f);
  return v;
}

// The values of "/o/w" (an optimizer moment beside the model's "/m/w").
std::vector<float> moment_values() {
  std::vector<float> v = global_values();
  for (float& x : v) x += 1000.0f;
  return v;
}

// Rank r of `ranks` writes rows [row_begin[r], row_begin[r + 1]) of "/m/w" (and, with `moment`,
// of "/o/w") as a box.
std::string save(const std::string& run, int64_t step, const std::vector<int64_t>& rows,
                 bool moment = false) {
  Env* env = Env::posix();
  static const std::vector<float> g = global_values(), o = moment_values();
  const int64_t world = static_cast<int64_t>(rows.size()) - 1;
  auto dir = store::save_dir(env, run, step);
  REQUIRE(dir.is_ok());
  REQUIRE(env->make_dirs(*dir).is_ok());
  for (int64_t r = 0; r < world; ++r) {
    Node root;
    const int64_t a = rows[r], b = rows[r + 1];
    for (const auto& [group, values] : {std::pair{"m", &g}, std::pair{"o", &o}}) {
      if (!moment && std::string(group) == "o") continue;
      Tensor t = Tensor::borrow(DType::kFloat32, {b - a, kCols}, values->data() + a * kCols,
                                static_cast<size_t>((b - a) * kCols) * sizeof(float));
      t.box = BoxOf{{kRows, kCols}, {a, 0}, "sharded", -1};
      root.child(group).tensors["w"] = std::move(t);
    }
    REQUIRE(store::write_rank(env, *dir, r, step, world, &root).is_ok());
  }
  Status s =
      store::commit(env, run, step, world,
                    moment ? std::vector<std::string>{"m", "o"} : std::vector<std::string>{"m"});
  if (!s.is_ok()) return "ERROR " + s.message();
  return path_join(run, step_dir_name(step));
}

TEST_CASE("boxes round-trip through the HDF5 file and the manifest", "[shard][io]") {
  testing::TempDir tmp;
  const std::string d = save(tmp.path(), 1, {0, 7, 12});
  REQUIRE(d.rfind("ERROR", 0) != 0);
  auto rs = store::open_rank_structure(Env::posix(), d, 1);
  REQUIRE(rs.is_ok());
  const Tensor* t = store::find_tensor(&rs->root, "/m/w");
  REQUIRE(t != nullptr);
  REQUIRE(t->box.has_value());
  CHECK(t->box->global_shape == std::vector<int64_t>{kRows, kCols});
  CHECK(t->box->offsets == std::vector<int64_t>{7, 0});
  CHECK(t->shape == std::vector<int64_t>{5, kCols});
  CHECK(rs->root.get_int("format_version") == kBoxFormatVersion);
  REQUIRE(rs->manifest.tensors.at(0).box.has_value());
  CHECK(*rs->manifest.tensors.at(0).box == *t->box);
}

TEST_CASE("ShardRead fills targets of another layout and reads only what they overlap",
          "[shard][io]") {
  testing::TempDir tmp;
  const std::string d = save(tmp.path(), 2, {0, 6, 12});
  REQUIRE(d.rfind("ERROR", 0) != 0);
  const std::vector<float> g = global_values();
  // three ranks now: rows 0-4, 4-8, 8-12
  for (int64_t a : {0, 4, 8}) {
    std::vector<float> out(4 * kCols, -1.0f);
    resume::ShardTarget t{"/m/w", store::make_extent({a, 0}, {4, kCols}), DType::kFloat32,
                          out.data(), out.size() * sizeof(float)};
    auto sr = resume::ShardRead::prepare(Env::posix(), d, {t}, {2, false, {}});
    REQUIRE(sr.is_ok());
    CHECK(out == std::vector<float>(4 * kCols, -1.0f));  // check first: nothing written yet
    REQUIRE(sr->copy_out().is_ok());
    CHECK(out == std::vector<float>(g.begin() + a * kCols, g.begin() + (a + 4) * kCols));
    CHECK(sr->stats().files == (a == 4 ? 2u : 1u));
  }
}

TEST_CASE("ShardRead fills fresh targets while it checks and reads again only the live ones",
          "[shard][io]") {
  testing::TempDir tmp;
  const std::string d = save(tmp.path(), 2, {0, 6, 12}, /*moment=*/true);
  REQUIRE(d.rfind("ERROR", 0) != 0);
  const std::vector<float> g = global_values(), o = moment_values();
  const uint64_t rows4 = 4 * kCols * sizeof(float);
  std::vector<float> live(4 * kCols, -1.0f), fresh(4 * kCols, -1.0f);
  resume::ShardTarget lt{"/m/w", store::make_extent({4, 0}, {4, kCols}), DType::kFloat32,
                         live.data(), rows4};
  resume::ShardTarget ft{"/o/w",          store::make_extent({4, 0}, {4, kCols}),
                         DType::kFloat32, fresh.data(),
                         rows4,           /*fresh=*/true};
  auto sr = resume::ShardRead::prepare(Env::posix(), d, {lt, ft}, {2, false, {}});
  REQUIRE(sr.is_ok());
  CHECK(live == std::vector<float>(4 * kCols, -1.0f));  // live: nothing written yet
  CHECK(fresh == std::vector<float>(o.begin() + 4 * kCols, o.begin() + 8 * kCols));
  CHECK(sr->stats().bytes_fresh == rows4);
  REQUIRE(sr->copy_out().is_ok());
  CHECK(live == std::vector<float>(g.begin() + 4 * kCols, g.begin() + 8 * kCols));
  // copy_out read the model's two boxes (rows 0-6 and 6-12) again, not the moment's
  CHECK(sr->stats().bytes_reread == kRows * kCols * sizeof(float));

  // A damaged model box: refused, the live target untouched.
  auto m = store::open_rank_structure(Env::posix(), d, 1);
  REQUIRE(m.is_ok());
  const ManifestEntry* box = nullptr;
  for (const auto& e : m->manifest.tensors) {
    if (e.path == "/m/w") box = &e;
  }
  REQUIRE(box != nullptr);
  testing::flip_bits(path_join(d, rank_file_name(1)), box->offset + 3, 0x10);
  std::fill(live.begin(), live.end(), -1.0f);
  auto bad = resume::ShardRead::prepare(Env::posix(), d, {lt, ft}, {2, false, {}});
  REQUIRE(bad.status().code() == Code::kCorrupt);
  CHECK(bad.status().message().find("nothing was restored") != std::string::npos);
  CHECK(live == std::vector<float>(4 * kCols, -1.0f));
}

TEST_CASE(
    "ShardRead reads a box over chunk_bytes straight into its target, a smaller one "
    "coalesced with its neighbours through staging",
    "[shard][io]") {
  testing::TempDir tmp;
  const std::string d = save(tmp.path(), 2, {0, 6, 12}, /*moment=*/true);
  REQUIRE(d.rfind("ERROR", 0) != 0);
  const std::vector<float> g = global_values(), o = moment_values();
  const uint64_t rows6 = 6 * kCols * sizeof(float);  // 96 bytes: rank 0's boxes
  for (uint64_t chunk_bytes : {uint64_t{1} << 20, uint64_t{64}}) {
    std::vector<float> live(6 * kCols, -1.0f), fresh(6 * kCols, -1.0f);
    resume::ShardTarget lt{"/m/w", store::make_extent({0, 0}, {6, kCols}), DType::kFloat32,
                           live.data(), rows6};
    resume::ShardTarget ft{"/o/w",          store::make_extent({0, 0}, {6, kCols}),
                           DType::kFloat32, fresh.data(),
                           rows6,           /*fresh=*/true};
    resume::ShardReadOptions opts;
    opts.io_threads = 2;
    opts.chunk_bytes = chunk_bytes;
    auto sr = resume::ShardRead::prepare(Env::posix(), d, {lt, ft}, opts);
    REQUIRE(sr.is_ok());
    CHECK(fresh == std::vector<float>(o.begin(), o.begin() + 6 * kCols));
    if (chunk_bytes > rows6) {  // both boxes in one read: the moment copied out of staging
      CHECK(sr->stats().bytes_copied == rows6);
      CHECK(sr->stats().bytes_in_place == 0);
    } else {  // each box read alone (in 64-byte reads), the moment straight into place
      CHECK(sr->stats().bytes_copied == 0);
      CHECK(sr->stats().bytes_in_place == rows6);
    }
    REQUIRE(sr->copy_out().is_ok());
    CHECK(live == std::vector<float>(g.begin(), g.begin() + 6 * kCols));
  }
}

TEST_CASE("commit refuses boxes that do not tile their tensor", "[shard][io]") {
  testing::TempDir tmp;
  Env* env = Env::posix();
  static const std::vector<float> g = global_values();
  auto dir = store::save_dir(env, tmp.path(), 3);
  REQUIRE(env->make_dirs(*dir).is_ok());
  for (int64_t r = 0; r < 2; ++r) {  // both ranks write rows 0-6: an overlap, and 6-12 missing
    Node root;
    Tensor t = Tensor::borrow(DType::kFloat32, {6, kCols}, g.data(), 6 * kCols * sizeof(float));
    t.box = BoxOf{{kRows, kCols}, {0, 0}, "sharded", -1};
    root.child("m").tensors["w"] = std::move(t);
    REQUIRE(store::write_rank(env, *dir, r, 3, 2, &root).is_ok());
  }
  Status s = store::commit(env, tmp.path(), 3, 2, {"m"});
  REQUIRE(s.code() == Code::kCorrupt);
  CHECK(s.message().find("commit refused") != std::string::npos);
  CHECK(s.message().find("overlap") != std::string::npos);
  CHECK_FALSE(env->exists(path_join(*dir, "COMMIT.json")));
}

TEST_CASE("the commit index refuses ranks that disagree on a tensor", "[shard][io]") {
  auto entry = [](int64_t offset, std::vector<int64_t> global) {
    ManifestEntry e;
    e.path = "/m/w";
    e.shape = {6, kCols};
    e.nbytes = 6 * kCols * 4;
    e.offset = 4096;
    e.box = BoxOf{std::move(global), {offset, 0}, "sharded", -1};
    return e;
  };
  Manifest a, b;
  a.file = "rank-00000.h5";
  b.file = "rank-00001.h5";
  b.rank = 1;
  a.tensors = {entry(0, {kRows, kCols})};
  b.tensors = {entry(6, {kRows + 1, kCols})};
  auto r = store::build_commit_index({a, b}, 1, "DIR");
  REQUIRE(r.status().code() == Code::kInvalidArgument);
  CHECK(r.status().message() ==
        "DIR: tensor \"/m/w\" is described differently by rank 0 and rank 1 (dtype, global "
        "shape or placement)");
  b.tensors = {entry(6, {kRows, kCols})};
  auto ok = store::build_commit_index({a, b}, 1, "DIR");
  REQUIRE(ok.is_ok());
  CHECK(ok->has_value());
  a.tensors[0].box.reset();
  b.tensors[0].box.reset();
  auto none = store::build_commit_index({a, b}, 1, "DIR");
  REQUIRE(none.is_ok());
  CHECK_FALSE(none->has_value());  // version 1: no INDEX
}

TEST_CASE("a damaged INDEX is refused against the commit record", "[shard][io]") {
  testing::TempDir tmp;
  const std::string d = save(tmp.path(), 4, {0, 6, 12});
  REQUIRE(d.rfind("ERROR", 0) != 0);
  const std::string path = path_join(d, "INDEX");
  std::FILE* f = std::fopen(path.c_str(), "r+b");
  REQUIRE(f != nullptr);
  std::fseek(f, 70, SEEK_SET);
  std::fputc(0x5a, f);
  std::fclose(f);
  auto index = resume::read_step_index(Env::posix(), d);
  REQUIRE(index.status().code() == Code::kCorrupt);
  CHECK(index.status().message().find("INDEX: xxh3 of the file is") != std::string::npos);
}

}  // namespace
}  // namespace ckpt::shard_read_test
