#include "resume/restore.h"

#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstring>

#include "ckpt/base/hash.h"
#include "ckpt/store/rank_io.h"
#include "resume/pipeline.h"
#include "resume_test_util.h"

namespace ckpt::resume::restore_test {
namespace {

using resume_test::TempDir;

struct Saved {
  TempDir dir;
  std::vector<std::vector<unsigned char>> storage;
  Node tree;
  Manifest manifest;
  std::string file;
};

void save(Saved* s) {
  s->tree = resume_test::varied_tree(&s->storage);
  auto m = store::write_rank(Env::posix(), s->dir.path(), 0, 42, 1, &s->tree);
  INFO(m.status().to_string());
  REQUIRE(m.is_ok());
  s->manifest = *m;
  s->file = path_join(s->dir.path(), rank_file_name(0));
}

const ManifestEntry& entry(const Manifest& m, const std::string& path) {
  for (const auto& e : m.tensors) {
    if (e.path == path) return e;
  }
  FAIL("no tensor " << path);
  return m.tensors.front();
}

TEST_CASE("restore_rank equals store::read_rank for every thread count and chunk size",
          "[resume]") {
  Saved s;
  save(&s);
  auto ref = store::read_rank(Env::posix(), s.dir.path(), 0);
  REQUIRE(ref.is_ok());
  for (unsigned threads : {1u, 2u, 3u, 8u}) {
    for (uint64_t chunk : {4096ull, 65536ull, 1ull << 20, 8ull << 20}) {
      for (uint64_t gap : {0ull, 65536ull}) {
        RestoreOptions o;
        o.io_threads = threads;
        o.chunk_bytes = chunk;
        o.max_gap = gap;
        RestoreStats stats;
        auto got = restore_rank(Env::posix(), s.dir.path(), 0, o, &stats);
        INFO("threads " << threads << " chunk " << chunk << " gap " << gap << ": "
                        << got.status().to_string());
        REQUIRE(got.is_ok());
        REQUIRE(resume_test::compare_trees(*ref, *got).empty());
        REQUIRE(stats.tensors == s.manifest.tensors.size());
        REQUIRE(stats.read_bytes >= stats.tensor_bytes);
        REQUIRE(stats.threads <= threads);
        const Node& model = got->children.at("model");
        REQUIRE(model.tensors.at("tied").data == model.tensors.at("big").data);
      }
    }
  }
}

TEST_CASE("restore_rank reads only the requested components, like read_rank", "[resume]") {
  Saved s;
  save(&s);
  store::ReadOptions ro;
  ro.components = {"optimizer", "rng"};
  auto ref = store::read_rank(Env::posix(), s.dir.path(), 0, ro);
  REQUIRE(ref.is_ok());
  RestoreOptions o;
  o.components = {Component::kOptimizer, Component::kRng};
  RestoreStats stats;
  auto got = restore_rank(Env::posix(), s.dir.path(), 0, o, &stats);
  REQUIRE(got.is_ok());
  REQUIRE(resume_test::compare_trees(*ref, *got).empty());
  REQUIRE(got->children.at("model").tensors.at("big").data == nullptr);
  REQUIRE(got->children.at("rng").children.at("cpu").tensors.at("state").data != nullptr);
  REQUIRE(stats.tensors == 41);  // 40 optimizer moments + the CPU RNG state
}

TEST_CASE("restore_rank reads groups named freely, as a Python checkpoint has them", "[resume]") {
  TempDir dir;
  const std::vector<float> opt(64, 1.5f), scale(8, 2.5f), weight(16, 3.5f);
  Node tree;
  tree.child("opt").tensors["m"] = Tensor::borrow(DType::kFloat32, {64}, opt.data(), 256);
  tree.child("scale").tensors["s"] = Tensor::borrow(DType::kFloat32, {8}, scale.data(), 32);
  tree.child("model").tensors["w"] = Tensor::borrow(DType::kFloat32, {16}, weight.data(), 64);
  REQUIRE(store::write_rank(Env::posix(), dir.path(), 0, 1, 1, &tree).is_ok());

  RestoreOptions o;
  o.groups = {"scale"};
  o.components = {Component::kModel};  // the two kinds of name together: either selects
  auto got = restore_rank(Env::posix(), dir.path(), 0, o);
  INFO(got.status().to_string());
  REQUIRE(got.is_ok());
  const Tensor& s = got->children.at("scale").tensors.at("s");
  REQUIRE(s.data != nullptr);
  REQUIRE(std::memcmp(s.data, scale.data(), 32) == 0);
  REQUIRE(got->children.at("model").tensors.at("w").data != nullptr);
  REQUIRE(got->children.at("opt").tensors.at("m").data == nullptr);

  // A group named by neither is outside the request: a destination in it is refused.
  std::vector<float> dst(64, 0.f);
  RestoreOptions outside;
  outside.groups = {"scale"};
  outside.destinations["/opt/m"] = {dst.data(), 256};
  REQUIRE(restore_rank(Env::posix(), dir.path(), 0, outside).status().code() ==
          Code::kInvalidArgument);
}

TEST_CASE("restore_rank writes in place into caller memory", "[resume]") {
  Saved s;
  save(&s);
  const ManifestEntry& big = entry(s.manifest, "/model/bigger");
  const ManifestEntry& odd = entry(s.manifest, "/model/odd");
  std::vector<unsigned char> big_dst(big.nbytes, 0xAA), odd_dst(odd.nbytes, 0xAA);
  RestoreOptions o;
  o.chunk_bytes = 65536;
  o.destinations["/model/bigger"] = {big_dst.data(), big_dst.size()};
  o.destinations["/model/odd"] = {odd_dst.data(), odd_dst.size()};
  RestoreStats stats;
  auto got = restore_rank(Env::posix(), s.dir.path(), 0, o, &stats);
  REQUIRE(got.is_ok());
  REQUIRE(stats.placed == 2);
  const Node& model = got->children.at("model");
  REQUIRE(model.tensors.at("bigger").data == big_dst.data());
  REQUIRE(model.tensors.at("odd").data == odd_dst.data());
  const Node& orig = s.tree.children.at("model");
  REQUIRE(std::memcmp(big_dst.data(), orig.tensors.at("bigger").data, big.nbytes) == 0);
  REQUIRE(std::memcmp(odd_dst.data(), orig.tensors.at("odd").data, odd.nbytes) == 0);
}

TEST_CASE("destinations of the wrong size, unknown or outside the components are refused",
          "[resume]") {
  Saved s;
  save(&s);
  const ManifestEntry& big = entry(s.manifest, "/model/big");
  std::vector<unsigned char> dst(big.nbytes + 1, 0xAA);
  RestoreOptions o;
  o.destinations["/model/big"] = {dst.data(), dst.size()};
  auto wrong = restore_rank(Env::posix(), s.dir.path(), 0, o);
  REQUIRE(wrong.status().code() == Code::kMismatch);
  const std::string msg = wrong.status().message();
  INFO(msg);
  REQUIRE(msg.find("tensor \"/model/big\" in " + s.file) != std::string::npos);
  REQUIRE(msg.find(std::to_string(big.nbytes + 1) + " bytes, expected " +
                   std::to_string(big.nbytes)) != std::string::npos);
  REQUIRE(dst[0] == 0xAA);  // refused before reading anything

  RestoreOptions unknown;
  unknown.destinations["/model/nope"] = {dst.data(), dst.size()};
  REQUIRE(restore_rank(Env::posix(), s.dir.path(), 0, unknown).status().code() == Code::kNotFound);

  RestoreOptions outside;
  outside.components = {Component::kOptimizer};
  outside.destinations["/model/big"] = {dst.data(), big.nbytes};
  REQUIRE(restore_rank(Env::posix(), s.dir.path(), 0, outside).status().code() ==
          Code::kInvalidArgument);
}

TEST_CASE("a flipped byte is reported with the tensor, file and offset", "[resume]") {
  // One tensor read whole, one split across chunks, one coalesced with its neighbours.
  for (const std::string path : {"/model/big", "/model/bigger", "/optimizer/state/p3/exp_avg"}) {
    for (uint64_t chunk : {65536ull, 8ull << 20}) {
      Saved s;
      save(&s);
      const ManifestEntry& e = entry(s.manifest, path);
      resume_test::flip_bit(s.file, e.offset + e.nbytes - 1);
      RestoreOptions o;
      o.chunk_bytes = chunk;
      o.io_threads = 3;
      auto got = restore_rank(Env::posix(), s.dir.path(), 0, o);
      INFO(path << " chunk " << chunk << ": " << got.status().to_string());
      REQUIRE(got.status().code() == Code::kCorrupt);
      char off[32];
      std::snprintf(off, sizeof off, "0x%llx", static_cast<unsigned long long>(e.offset));
      const std::string want = "tensor \"" + path + "\" in " + s.file +
                               ": xxh3 mismatch at offset " + off + " (expected " + hex64(e.xxh3) +
                               ", got ";
      REQUIRE(got.status().message().find(want) == 0);

      // With verification off the bytes come back as stored: the flip is visible.
      o.verify_hashes = false;
      auto unchecked = restore_rank(Env::posix(), s.dir.path(), 0, o);
      REQUIRE(unchecked.is_ok());
    }
  }
}

TEST_CASE("a truncated rank file is an error", "[resume]") {
  Saved s;
  save(&s);
  const ManifestEntry& e = entry(s.manifest, "/model/bigger");
  REQUIRE(::truncate(s.file.c_str(), static_cast<off_t>(e.offset + 100)) == 0);
  auto got = restore_rank(Env::posix(), s.dir.path(), 0);
  REQUIRE(!got.is_ok());
  INFO(got.status().to_string());
  REQUIRE(got.status().code() == Code::kCorrupt);
  REQUIRE(got.status().message().find("truncated") != std::string::npos);
}

TEST_CASE("the pipeline reports a file shorter than its plan as truncated", "[resume]") {
  // Below restore_rank's size check: the engine itself must not trust the plan.
  Saved s;
  save(&s);
  std::vector<size_t> all(s.manifest.tensors.size());
  for (size_t i = 0; i < all.size(); ++i) all[i] = i;
  auto plan = make_read_plan(s.manifest, all, PlanOptions{65536, 65536});
  REQUIRE(plan.is_ok());
  REQUIRE(::truncate(s.file.c_str(), static_cast<off_t>(s.manifest.file_bytes / 2)) == 0);
  auto file = Env::posix()->open_random(s.file);
  REQUIRE(file.is_ok());

  struct Discard final : ChunkSink {
    std::vector<unsigned char> buf[4];
    Result<unsigned char*> acquire(unsigned w, const PlanChunk& c) override {
      buf[w].resize(c.nbytes);
      return buf[w].data();
    }
    Status deliver(unsigned, const PlanChunk&, unsigned char*) override { return Status::ok(); }
    Status release(unsigned, const PlanChunk&, unsigned char*) override { return Status::ok(); }
  } sink;
  PipelineOptions po;
  po.io_threads = 4;
  Status st = run_pipeline(**file, *plan, &sink, po);
  INFO(st.to_string());
  REQUIRE(st.code() == Code::kCorrupt);
  REQUIRE(st.message().find(s.file + ": truncated") == 0);
}

TEST_CASE("a zero-byte tensor whose recorded hash is not the empty hash is corrupt", "[resume]") {
  ManifestEntry e;
  e.path = "/model/empty";
  e.shape = {0};
  e.xxh3 = 1234;
  auto plan = make_read_plan({e});
  REQUIRE(plan.is_ok());
  TempDir dir;
  const std::string path = path_join(dir.path(), "f");
  REQUIRE(Env::posix()->write_atomic(path, "x").is_ok());
  auto file = Env::posix()->open_random(path);
  REQUIRE(file.is_ok());
  struct Never final : ChunkSink {
    Result<unsigned char*> acquire(unsigned, const PlanChunk&) override {
      return internal_error("no chunk expected");
    }
    Status deliver(unsigned, const PlanChunk&, unsigned char*) override { return Status::ok(); }
    Status release(unsigned, const PlanChunk&, unsigned char*) override { return Status::ok(); }
  } sink;
  Status st = run_pipeline(**file, *plan, &sink, PipelineOptions{});
  REQUIRE(st.code() == Code::kCorrupt);
  REQUIRE(st.message().find("tensor \"/model/empty\" in " + path) == 0);
}

}  // namespace
}  // namespace ckpt::resume::restore_test
