// Chunk digests (docs/format.md §4): a box larger than one chunk carries the XXH3 of each of its
// chunks in the manifest, so a rank restoring at another world size reads and checks only the
// chunks its runs touch instead of the whole boxes they straddle.
#include <catch2/catch.hpp>
#include <cstring>
#include <numeric>
#include <vector>

#include "ckpt/base/hash.h"
#include "ckpt/io/env.h"
#include "ckpt/store/rank_io.h"
#include "ckpt/store/run_dir.h"
#include "resume/pipeline.h"
#include "resume/read_plan.h"
#include "resume/reshard_read.h"
#include "tests/common/remote_env.h"
#include "tests/common/test_util.h"

namespace ckpt::chunk_read_test {
namespace {

constexpr uint64_t kMiB = 1u << 20;
constexpr int64_t kCols = 1024;                                          // 4 KiB rows
constexpr int64_t kRows = 8 * static_cast<int64_t>(kMiB) / (kCols * 4);  // 8 MiB in all

const std::vector<float>& global_values() {
  static const std::vector<float> v = [] {
    std::vector<float> g(static_cast<size_t>(kRows * kCols));
    std::iota(g.begin(), g.end(), 0.0f);
    return g;
  }();
  return v;
}

// "/m/w" saved row-sharded over `world` ranks (equal parts): the step directory.
std::string save(const std::string& run, int64_t step, int64_t world) {
  Env* env = Env::posix();
  const std::vector<float>& g = global_values();
  auto dir = store::save_dir(env, run, step);
  REQUIRE(dir.is_ok());
  REQUIRE(env->make_dirs(*dir).is_ok());
  for (int64_t r = 0; r < world; ++r) {
    const int64_t a = kRows * r / world, b = kRows * (r + 1) / world;
    Node root;
    Tensor t = Tensor::borrow(DType::kFloat32, {b - a, kCols}, g.data() + a * kCols,
                              static_cast<size_t>((b - a) * kCols) * sizeof(float));
    t.box = BoxOf{{kRows, kCols}, {a, 0}, "sharded", -1};
    root.child("m").tensors["w"] = std::move(t);
    REQUIRE(store::write_rank(env, *dir, r, step, world, &root).is_ok());
  }
  REQUIRE(store::commit(env, run, step, world, {"m"}).is_ok());
  return path_join(run, step_dir_name(step));
}

struct Restored {
  Status status;
  resume::ShardReadStats stats;
  bool exact = false;
  bool untouched = false;  // nothing written into the target when prepare failed (or returned)
};

// Rank `rank` of `world` restores its equal part of "/m/w" (check first, or in place).
Restored restore(const std::string& step_dir, int64_t rank, int64_t world, bool in_place = false,
                 Env* env = Env::posix()) {
  const int64_t a = kRows * rank / world, b = kRows * (rank + 1) / world;
  std::vector<float> out(static_cast<size_t>((b - a) * kCols), -1.0f);
  resume::ShardTarget t{"/m/w", store::make_extent({a, 0}, {b - a, kCols}), DType::kFloat32,
                        out.data(), out.size() * sizeof(float)};
  Restored r;
  auto sr = resume::ShardRead::prepare(env, step_dir, {t}, {2, in_place, {}});
  r.untouched = std::all_of(out.begin(), out.end(), [](float x) { return x == -1.0f; });
  if (!sr.is_ok()) {
    r.status = sr.status();
    return r;
  }
  r.status = sr->copy_out();
  r.stats = sr->stats();
  const std::vector<float>& g = global_values();
  r.exact = std::equal(out.begin(), out.end(), g.begin() + a * kCols);
  return r;
}

TEST_CASE("a box larger than a chunk carries its chunk digests in the manifest",
          "[shard][io][chunks]") {
  testing::TempDir tmp;
  const std::string d = save(tmp.path(), 1, 2);
  auto m = store::read_manifest(Env::posix(), d, 1);
  REQUIRE(m.is_ok());
  const ManifestEntry& e = m->tensors.at(0);
  REQUIRE(e.chunk_bytes == kBoxChunkBytes);
  REQUIRE(e.chunk_xxh3.size() == 4);  // 4 MiB in 1 MiB chunks
  const std::vector<float>& g = global_values();
  const auto* p = reinterpret_cast<const unsigned char*>(g.data()) + 4 * kMiB;  // rank 1's rows
  CHECK(e.chunk_xxh3 == chunk_digests(p, 4 * kMiB, kBoxChunkBytes));
  CHECK(e.xxh3 == xxh3_64(p, 4 * kMiB));
}

TEST_CASE("a rank restoring at another world size reads only the chunks it needs",
          "[shard][io][chunks]") {
  testing::TempDir tmp;
  const std::string d = save(tmp.path(), 2, 2);  // two 4 MiB boxes
  SECTION("4 ranks: each needs half of one box, two of its chunks") {
    for (int64_t r = 0; r < 4; ++r) {
      const Restored got = restore(d, r, 4);
      REQUIRE(got.status.is_ok());
      CHECK(got.exact);
      CHECK(got.stats.bytes_read == 2 * kMiB);  // not the box's 4
      CHECK(got.stats.chunks == 2);
      CHECK(got.stats.boxes == 0);
    }
  }
  SECTION("3 ranks: the middle one straddles both boxes") {
    const Restored mid = restore(d, 1, 3);  // bytes [2.67, 5.33) MiB: chunks 2-3 and 0-1
    REQUIRE(mid.status.is_ok());
    CHECK(mid.exact);
    CHECK(mid.stats.files == 2);
    CHECK(mid.stats.bytes_read == 4 * kMiB);  // not both boxes' 8
    CHECK(mid.stats.chunks == 4);
  }
  SECTION("the same world size reads every box whole") {
    const Restored same = restore(d, 0, 2);
    REQUIRE(same.status.is_ok());
    CHECK(same.exact);
    CHECK(same.stats.boxes == 1);
    CHECK(same.stats.chunks == 0);
  }
}

TEST_CASE("without a usable manifest the boxes are read whole", "[shard][io][chunks]") {
  testing::TempDir tmp;
  const std::string d = save(tmp.path(), 3, 2);
  std::string path = path_join(d, rank_manifest_name(0));
  SECTION("missing") { REQUIRE(Env::posix()->remove_file(path).is_ok()); }
  SECTION("damaged") { testing::flip_bits(path, 40, 0x01); }
  const Restored got = restore(d, 0, 4);
  REQUIRE(got.status.is_ok());
  CHECK(got.exact);
  CHECK(got.stats.bytes_read == 4 * kMiB);
  CHECK(got.stats.boxes == 1);
  CHECK(got.stats.chunks == 0);
}

TEST_CASE("a damaged chunk is refused by the ranks that read it, before anything is written",
          "[shard][io][chunks]") {
  testing::TempDir tmp;
  const std::string d = save(tmp.path(), 4, 2);
  auto m = store::read_manifest(Env::posix(), d, 0);
  REQUIRE(m.is_ok());
  // A byte of chunk 0 of rank 0's box: rank 0 of 4 reads it, rank 1 of 4 (chunks 2-3) does not.
  testing::flip_bits(path_join(d, m->file), m->tensors.at(0).offset + kMiB / 2, 0x10);
  const Restored bad = restore(d, 0, 4);
  CHECK(bad.status.code() == Code::kCorrupt);
  CHECK(bad.status.message().find("\"/m/w bytes [0, 1048576)\"") != std::string::npos);
  CHECK(bad.status.message().find("nothing was restored") != std::string::npos);
  CHECK(bad.untouched);
  const Restored fine = restore(d, 1, 4);
  REQUIRE(fine.status.is_ok());
  CHECK(fine.exact);
}

TEST_CASE("a manifest that disagrees with the INDEX on a box is refused", "[shard][io][chunks]") {
  testing::TempDir tmp;
  const std::string d = save(tmp.path(), 6, 2);
  auto index = resume::read_step_index(Env::posix(), d);
  REQUIRE(index.is_ok());
  auto plan =
      resume::plan_reshard(*index, {{"/m/w", store::make_extent({0, 0}, {kRows / 4, kCols})}});
  REQUIRE(plan.is_ok());
  auto m = store::read_manifest(Env::posix(), d, 0);
  REQUIRE(m.is_ok());
  auto reads = resume::checked_reads(*index, plan->files.at(0), &*m);
  REQUIRE(reads.is_ok());
  CHECK(reads->size() == 2);  // chunks 0 and 1
  CHECK(reads->at(1).box_offset == kMiB);
  CHECK(reads->at(1).entry.xxh3 == m->tensors[0].chunk_xxh3[1]);
  m->tensors[0].xxh3 ^= 1;
  auto bad = resume::checked_reads(*index, plan->files.at(0), &*m);
  CHECK(bad.status().code() == Code::kCorrupt);
  CHECK(bad.status().message() ==
        "rank-00000.h5: the manifest and the INDEX disagree on box \"/m/w\" (offset, size or "
        "xxh3)");
}

TEST_CASE("in place: reads that fit one run go straight into the target", "[shard][io][chunks]") {
  testing::TempDir tmp;
  const std::string d = save(tmp.path(), 7, 2);  // two 4 MiB boxes
  SECTION("the same world size: every byte, nothing copied") {
    for (int64_t r = 0; r < 2; ++r) {
      const Restored got = restore(d, r, 2, true);
      REQUIRE(got.status.is_ok());
      CHECK(got.exact);
      CHECK(got.stats.bytes_in_place == 4 * kMiB);
      CHECK(got.stats.bytes_copied == 0);
    }
    const Restored first = restore(d, 0, 2);  // check first: the same, read a second time
    CHECK(first.stats.bytes_in_place == 4 * kMiB);
    CHECK(first.stats.bytes_reread == 4 * kMiB);
    CHECK(first.stats.bytes_copied == 0);
  }
  SECTION("4 ranks: each run is two whole chunks") {
    for (int64_t r = 0; r < 4; ++r) {
      const Restored got = restore(d, r, 4, true);
      REQUIRE(got.status.is_ok());
      CHECK(got.exact);
      CHECK(got.stats.bytes_in_place == 2 * kMiB);
      CHECK(got.stats.bytes_copied == 0);
    }
  }
  SECTION("3 ranks: only a chunk that straddles a run's end goes through staging") {
    const Restored mid = restore(d, 1, 3, true);  // bytes [2.67, 5.33) MiB
    REQUIRE(mid.status.is_ok());
    CHECK(mid.exact);
    CHECK(mid.stats.bytes_in_place == 2 * kMiB);  // chunks [3, 4) and [4, 5) MiB
    const uint64_t rows = static_cast<uint64_t>(kRows * 2 / 3 - kRows / 3);
    CHECK(mid.stats.bytes_copied == rows * kCols * 4 - 2 * kMiB);
    for (int64_t r : {0, 2}) {
      const Restored got = restore(d, r, 3, true);
      REQUIRE(got.status.is_ok());
      CHECK(got.exact);
      CHECK(got.stats.bytes_in_place == 2 * kMiB);
    }
  }
}

TEST_CASE("in place: a damaged box is still refused but the live shard is partly overwritten",
          "[shard][io][chunks]") {
  testing::TempDir tmp;
  const std::string d = save(tmp.path(), 8, 2);
  auto m = store::read_manifest(Env::posix(), d, 1);
  REQUIRE(m.is_ok());
  testing::flip_bits(path_join(d, m->file), m->tensors.at(0).offset + 100, 0x04);
  // World 1 reads rank 0's box (fine, in place) and then rank 1's (damaged).
  const Restored placed = restore(d, 0, 1, true);
  CHECK(placed.status.code() == Code::kCorrupt);
  CHECK(placed.status.message().find("the live shards are partly overwritten") !=
        std::string::npos);
  CHECK_FALSE(placed.untouched);
  const Restored first = restore(d, 0, 1);
  CHECK(first.status.code() == Code::kCorrupt);
  CHECK(first.status.message().find("nothing was restored") != std::string::npos);
  CHECK(first.untouched);
}

TEST_CASE("check first: what fits a run is checked then read again into the target",
          "[shard][io][chunks]") {
  testing::TempDir tmp;
  const std::string d = save(tmp.path(), 9, 2);  // two 4 MiB boxes
  SECTION("the same world size: prepare writes nothing, copy_out reads every byte again") {
    for (int64_t r = 0; r < 2; ++r) {
      const Restored got = restore(d, r, 2);
      REQUIRE(got.status.is_ok());
      CHECK(got.untouched);  // after prepare
      CHECK(got.exact);
      CHECK(got.stats.bytes_read == 4 * kMiB);
      CHECK(got.stats.bytes_reread == 4 * kMiB);
      CHECK(got.stats.bytes_in_place == 4 * kMiB);
      CHECK(got.stats.bytes_copied == 0);
    }
  }
  SECTION("3 ranks: a chunk that straddles a run's end is copied from staging") {
    const Restored mid = restore(d, 1, 3);
    REQUIRE(mid.status.is_ok());
    CHECK(mid.untouched);
    CHECK(mid.exact);
    CHECK(mid.stats.bytes_in_place == 2 * kMiB);
    CHECK(mid.stats.bytes_reread == 4 * kMiB);  // every chunk checked is read again
    const uint64_t rows = static_cast<uint64_t>(kRows * 2 / 3 - kRows / 3);
    CHECK(mid.stats.bytes_copied == rows * kCols * 4 - 2 * kMiB);
  }
  SECTION("a remote file is read once: the second read comes from the checked bytes") {
    testing::RemoteEnv remote(ReadProfile{4, 0, true});
    const Restored got = restore(d, 0, 1, false, &remote);
    REQUIRE(got.status.is_ok());
    CHECK(got.exact);
    CHECK(got.stats.bytes_reread == 8 * kMiB);
    const uint64_t index_and_manifests = remote.read.load() - 8 * kMiB;
    CHECK(index_and_manifests < 64 * 1024);  // the boxes' bytes came over once
  }
}

TEST_CASE("check first: a rank file changed between the check and the copy fails the copy",
          "[shard][io][chunks]") {
  testing::TempDir tmp;
  const std::string d = save(tmp.path(), 10, 2);
  auto m = store::read_manifest(Env::posix(), d, 0);
  REQUIRE(m.is_ok());
  std::vector<float> out(static_cast<size_t>(kRows / 2 * kCols), -1.0f);
  resume::ShardTarget t{"/m/w", store::make_extent({0, 0}, {kRows / 2, kCols}), DType::kFloat32,
                        out.data(), out.size() * sizeof(float)};
  auto sr = resume::ShardRead::prepare(Env::posix(), d, {t}, {2, false, {}});
  REQUIRE(sr.is_ok());
  std::FILE* f = std::fopen(path_join(d, m->file).c_str(), "ab");  // another writer appends
  REQUIRE(f != nullptr);
  std::fputc(0, f);
  std::fclose(f);
  const Status s = sr->copy_out();
  CHECK(s.code() == Code::kIoError);
  CHECK(s.message().find("rank-00000.h5: changed while it was being restored") !=
        std::string::npos);
  CHECK(s.message().find("the live shards are partly overwritten; restore again") !=
        std::string::npos);
}

// A sink that keeps nothing: the pipeline's hash checks are what is tested.
class DropSink final : public resume::ChunkSink {
 public:
  Result<unsigned char*> acquire(unsigned, const resume::PlanChunk& c) override {
    buf_.resize(c.nbytes);
    return buf_.data();
  }
  Status deliver(unsigned, const resume::PlanChunk&, unsigned char*) override {
    return Status::ok();
  }
  Status release(unsigned, const resume::PlanChunk&, unsigned char*) override {
    return Status::ok();
  }

 private:
  std::vector<unsigned char> buf_;
};

TEST_CASE("a whole read checks the chunk digests too", "[shard][io][chunks]") {
  testing::TempDir tmp;
  const std::string d = save(tmp.path(), 5, 2);
  auto m = store::read_manifest(Env::posix(), d, 1);
  REQUIRE(m.is_ok());
  auto file = Env::posix()->open_random(path_join(d, m->file));
  REQUIRE(file.is_ok());
  auto run = [&](const Manifest& man) {
    auto plan = resume::make_read_plan(man.tensors, resume::PlanOptions{kMiB / 3, 0, 0});
    REQUIRE(plan.is_ok());
    DropSink sink;
    return resume::run_pipeline(**file, *plan, &sink, resume::PipelineOptions{1, true, false, 0},
                                nullptr);
  };
  CHECK(run(*m).is_ok());  // reads of a third of a chunk: chunks hashed across pieces
  Manifest wrong = *m;
  wrong.tensors[0].chunk_xxh3[2] ^= 1;  // the whole tensor's digest still right
  const Status s = run(wrong);
  CHECK(s.code() == Code::kCorrupt);
  CHECK(s.message().find("bytes [2097152, 3145728) (chunk 2") != std::string::npos);
}

}  // namespace
}  // namespace ckpt::chunk_read_test
