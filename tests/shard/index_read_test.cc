// A restoring rank reads of an index version 2 INDEX only its head and the records of the boxes
// its targets meet (resume/index_read.h), checks the head against the commit record, and refuses
// a damaged record it needs through the box it points to; an index version 1 INDEX is read whole.
#include <catch2/catch.hpp>
#include <cstdio>
#include <numeric>
#include <vector>

#include "ckpt/base/hash.h"
#include "ckpt/io/env.h"
#include "ckpt/store/box_index.h"
#include "ckpt/store/rank_io.h"
#include "ckpt/store/run_dir.h"
#include "resume/reshard_read.h"
#include "tests/common/test_util.h"

namespace ckpt::index_read_test {
namespace {

constexpr int64_t kRows = 16, kCols = 4, kTensors = 8, kRanks = 4;
const char* const kNames[kTensors] = {"a", "b", "c", "d", "e", "f", "g", "h"};

float value(int t, int64_t i) { return static_cast<float>(t * 1000 + i); }

// Eight [16, 4] float32 tensors, rows split evenly over 4 ranks (one grid: the records of one
// rank's rows of every tensor lie together).
std::string save(const std::string& run) {
  Env* env = Env::posix();
  static std::vector<std::vector<float>> g;
  g.assign(kTensors, std::vector<float>(kRows * kCols));
  for (int t = 0; t < kTensors; ++t) {
    for (int64_t i = 0; i < kRows * kCols; ++i) g[t][i] = value(t, i);
  }
  auto dir = store::save_dir(env, run, 5);
  REQUIRE(dir.is_ok());
  REQUIRE(env->make_dirs(*dir).is_ok());
  const int64_t rows = kRows / kRanks;
  for (int64_t r = 0; r < kRanks; ++r) {
    Node root;
    for (int t = 0; t < kTensors; ++t) {
      Tensor x = Tensor::borrow(DType::kFloat32, {rows, kCols}, g[t].data() + r * rows * kCols,
                                rows * kCols * sizeof(float));
      x.box = BoxOf{{kRows, kCols}, {r * rows, 0}, "sharded", -1};
      root.child("m").tensors[kNames[t]] = std::move(x);
    }
    REQUIRE(store::write_rank(env, *dir, r, 5, kRanks, &root).is_ok());
  }
  REQUIRE(store::commit(env, run, 5, kRanks, {"m"}).is_ok());
  return path_join(run, step_dir_name(5));
}

struct Restored {
  Status status = Status::ok();
  std::vector<std::vector<float>> out;
  resume::ShardReadStats stats;
};

// Rows [first, first + rows) of every tensor, read with `options`.
Restored restore(const std::string& d, int64_t first, int64_t rows,
                 const resume::IndexReadOptions& options) {
  Restored res;
  res.out.assign(kTensors, std::vector<float>(rows * kCols, -1.0f));
  std::vector<resume::ShardTarget> targets;
  for (int t = 0; t < kTensors; ++t) {
    targets.push_back({std::string("/m/") + kNames[t],
                       store::make_extent({first, 0}, {rows, kCols}), DType::kFloat32,
                       res.out[t].data(), res.out[t].size() * sizeof(float)});
  }
  auto sr = resume::ShardRead::prepare(Env::posix(), d, targets, {1, false, options});
  if (!sr.is_ok()) {
    res.status = sr.status();
    return res;
  }
  res.status = sr->copy_out();
  res.stats = sr->stats();
  return res;
}

bool holds_rows(const Restored& r, int64_t first, int64_t rows) {
  for (int t = 0; t < kTensors; ++t) {
    for (int64_t i = 0; i < rows * kCols; ++i) {
      if (r.out[t][i] != value(t, first * kCols + i)) return false;
    }
  }
  return true;
}

resume::IndexReadOptions in_parts() {
  resume::IndexReadOptions o;
  o.whole_below = 0;  // however small
  o.first_read = 64;  // the header alone
  o.merge_gap = 0;
  return o;
}

void flip(const std::string& path, uint64_t at) {
  std::FILE* f = std::fopen(path.c_str(), "r+b");
  REQUIRE(f != nullptr);
  std::fseek(f, static_cast<long>(at), SEEK_SET);
  const int c = std::fgetc(f);
  std::fseek(f, static_cast<long>(at), SEEK_SET);
  std::fputc(c ^ 0x01, f);
  std::fclose(f);
}

TEST_CASE("a restoring rank reads the INDEX's head and the records it needs", "[shard][io]") {
  testing::TempDir tmp;
  const std::string d = save(tmp.path());
  auto index_bytes = Env::posix()->read_all(path_join(d, "INDEX"), 1 << 20);
  REQUIRE(index_bytes.is_ok());
  const uint64_t size = index_bytes->size();
  auto index = store::decode_index(*index_bytes, "INDEX");
  REQUIRE(index.is_ok());
  const uint64_t head = index->directory_bytes();
  REQUIRE(size == head + 16 * kTensors * kRanks);

  for (int64_t first : {0, 8}) {  // two ranks now: rows 0-8, 8-16
    Restored r = restore(d, first, 8, in_parts());
    INFO(r.status.to_string());
    REQUIRE(r.status.is_ok());
    CHECK(holds_rows(r, first, 8));
    // the header, the rest of the head, then one run: 2 rows of cells x 8 tensors
    CHECK(r.stats.index_reads == 3);
    CHECK(r.stats.index_bytes_read == head + 2 * kTensors * 16);
    CHECK(r.stats.index_bytes_read < size);
  }
  // Read whole when small (the default): one read of every byte.
  Restored whole = restore(d, 4, 4, {});
  REQUIRE(whole.status.is_ok());
  CHECK(holds_rows(whole, 4, 4));
  CHECK(whole.stats.index_reads == 1);
  CHECK(whole.stats.index_bytes_read == size);
}

TEST_CASE("a damaged INDEX head is refused against the commit record", "[shard][io]") {
  testing::TempDir tmp;
  const std::string d = save(tmp.path());
  flip(path_join(d, "INDEX"), 66);  // inside the head's directory
  Restored r = restore(d, 0, 8, in_parts());
  REQUIRE(r.status.code() == Code::kCorrupt);
  CHECK(r.status.message().find("INDEX: xxh3 of its head") != std::string::npos);
  CHECK(r.out[0] == std::vector<float>(8 * kCols, -1.0f));
}

TEST_CASE("a damaged record is refused where a rank needs it, through its box", "[shard][io]") {
  testing::TempDir tmp;
  const std::string d = save(tmp.path());
  auto bytes = Env::posix()->read_all(path_join(d, "INDEX"), 1 << 20);
  REQUIRE(bytes.is_ok());
  auto index = store::decode_index(*bytes, "INDEX");
  REQUIRE(index.is_ok());
  // The XXH3 of tensor "/m/c"'s last box (rows 12-16): a rank restoring rows 8-16 needs it.
  const int64_t t = index->find_tensor("/m/c");
  const store::IndexTensor& it = index->tensor(t);
  const uint64_t record = index->record_offset(it, it.first_box + 3);
  flip(path_join(d, "INDEX"), record + 8);
  Restored low = restore(d, 0, 8, in_parts());  // does not read that record
  INFO(low.status.to_string());
  CHECK(low.status.is_ok());
  CHECK(holds_rows(low, 0, 8));
  Restored high = restore(d, 8, 8, in_parts());
  REQUIRE(high.status.code() == Code::kCorrupt);
  CHECK(high.status.message().find("rank-00003.h5") != std::string::npos);
  CHECK(high.status.message().find("nothing was restored") != std::string::npos);
  for (int k = 0; k < kTensors; ++k) CHECK(high.out[k] == std::vector<float>(8 * kCols, -1.0f));
  // The same damage to the record's offset reads other bytes: refused too.
  flip(path_join(d, "INDEX"), record + 8);
  flip(path_join(d, "INDEX"), record + 4);
  CHECK(restore(d, 8, 8, in_parts()).status.code() == Code::kCorrupt);
  // Read whole, the file's hash in the commit record names the INDEX itself.
  CHECK(resume::read_step_index(Env::posix(), d)
            .status()
            .message()
            .find("INDEX: xxh3 of the file is") != std::string::npos);
}

TEST_CASE("an index version 1 INDEX is read whole, and restores", "[shard][io]") {
  testing::TempDir tmp;
  const std::string d = save(tmp.path());
  Env* env = Env::posix();
  const std::string ipath = path_join(d, "INDEX"), cpath = path_join(d, "COMMIT.json");
  auto bytes = env->read_all(ipath, 1 << 20);
  REQUIRE(bytes.is_ok());
  auto index = store::decode_index(*bytes, ipath);
  REQUIRE(index.is_ok());
  // As a checkpoint written before index version 2: a version 1 INDEX, listed without a head hash.
  const std::string v1 = store::encode_index(*index, 1);
  auto text = env->read_all(cpath, 1 << 20);
  REQUIRE(text.is_ok());
  auto rec = decode_commit(*text, cpath);
  REQUIRE(rec.is_ok());
  for (CommitFile& f : rec->files) {
    if (f.name != "INDEX") continue;
    f.bytes = v1.size();
    f.xxh3 = xxh3_64(v1.data(), v1.size());
    f.regions_xxh3.reset();
  }
  REQUIRE(env->write_atomic(ipath, v1).is_ok());
  REQUIRE(env->write_atomic(cpath, encode_commit(*rec)).is_ok());
  Restored r = restore(d, 8, 8, in_parts());
  INFO(r.status.to_string());
  REQUIRE(r.status.is_ok());
  CHECK(holds_rows(r, 8, 8));
  CHECK(r.stats.index_reads == 1);
  CHECK(r.stats.index_bytes_read == v1.size());
  // Listed with a head hash but version 1 inside: read whole as well.
  for (CommitFile& f : rec->files) {
    if (f.name == "INDEX") f.regions_xxh3 = 1;
  }
  REQUIRE(env->write_atomic(cpath, encode_commit(*rec)).is_ok());
  Restored again = restore(d, 0, 8, in_parts());
  REQUIRE(again.status.is_ok());
  CHECK(holds_rows(again, 0, 8));
}

}  // namespace
}  // namespace ckpt::index_read_test
