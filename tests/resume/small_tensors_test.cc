// Restores of a layer list that is mostly small tensors (biases, norms, per-parameter steps beside
// a few large weights), the shape real checkpoints have: many tensors share each read, larger ones
// read alone, and the result is still every byte, every hash checked, all or nothing.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cstring>
#include <map>

#include "ckpt/format/regions.h"
#include "ckpt/store/rank_io.h"
#include "ckpt/store/regions_check.h"
#include "ckpt/store/run_dir.h"
#include "resume/load_all.h"
#include "resume/restore.h"
#include "resume_test_util.h"

namespace ckpt::resume::small_tensors_test {
namespace {

struct LayerList {
  resume_test::TempDir dir;
  std::vector<std::vector<unsigned char>> storage;
  std::map<std::string, const std::vector<unsigned char>*> saved;  // path → bytes written
  std::string step_dir;
  CommitFile listed;
};

// 60 parameters of 4 B, 16 KiB, 256 KiB and 1.5 MiB in turn, each with an AdamW-like exp_avg and
// a 4-byte step: 180 tensors, most of them small, committed as step 3 of a run.
void save_layer_list(LayerList* l) {
  Node root;
  uint32_t seed = 7;
  auto add = [&](Node& n, const std::string& name, size_t nbytes, const std::string& path) {
    l->storage.emplace_back(nbytes);
    for (auto& b : l->storage.back()) {
      seed = seed * 1664525u + 1013904223u;
      b = static_cast<unsigned char>(seed >> 24);
    }
    n.tensors[name] = Tensor::borrow(DType::kFloat32, {static_cast<int64_t>(nbytes / 4)},
                                     l->storage.back().data(), nbytes);
    l->saved[path] = &l->storage.back();
  };
  l->storage.reserve(200);  // the saved map points into it
  const size_t sizes[] = {4, 16u << 10, 256u << 10, 3u << 19};
  for (int i = 0; i < 60; ++i) {
    const std::string p = "p" + std::to_string(100 + i);
    const size_t n = sizes[i % 4];
    add(root.child("model"), p, n, "/model/" + p);
    Node& st = root.child("optimizer").child("state").child(p);
    add(st, "exp_avg", n, "/optimizer/state/" + p + "/exp_avg");
    add(st, "step", 4, "/optimizer/state/" + p + "/step");
  }
  l->step_dir = path_join(l->dir.path(), step_dir_name(3));
  REQUIRE(Env::posix()->make_dirs(l->step_dir).is_ok());
  REQUIRE(store::write_rank(Env::posix(), l->step_dir, 0, 3, 1, &root).is_ok());
  REQUIRE(store::commit(Env::posix(), l->dir.path(), 3, 1, {"model", "optimizer"}).is_ok());
  auto rec = store::read_commit(Env::posix(), l->step_dir);
  REQUIRE(rec.is_ok());
  auto listed = store::listed_rank_file(*rec, l->step_dir, 0);
  REQUIRE(listed.is_ok());
  l->listed = *listed;
}

// Zeroed caller memory for every tensor, as a live model's.
struct Live {
  std::map<std::string, std::vector<unsigned char>> bytes;
  Live(const LayerList& l, RestoreOptions* o) {
    for (const auto& [path, b] : l.saved) {
      auto& v = bytes[path];
      v.assign(b->size(), 0);
      o->destinations[path] = {v.data(), v.size()};
    }
  }
  bool all_zero() const {
    for (const auto& [path, v] : bytes) {
      for (unsigned char c : v) {
        if (c != 0) return false;
      }
    }
    return true;
  }
};

RestoreOptions as_restore_latest(const LayerList& l, unsigned threads) {
  RestoreOptions o;
  o.io_threads = threads;
  o.check_first = true;
  check_whole_file(l.listed, &o);
  return o;
}

TEST_CASE("a layer list of small tensors restores every byte through shared reads", "[resume]") {
  LayerList l;
  save_layer_list(&l);
  for (unsigned threads : {1u, 3u}) {
    RestoreOptions o = as_restore_latest(l, threads);
    Live live(l, &o);
    RestoreStats stats;
    auto got = restore_rank(Env::posix(), l.step_dir, 0, o, &stats);
    INFO(got.status().to_string());
    REQUIRE(got.is_ok());
    REQUIRE(stats.tensors == 180);
    REQUIRE(stats.placed == 180);
    for (const auto& [path, b] : live.bytes) {
      INFO(path);
      REQUIRE(b == *l.saved.at(path));
    }
    // Two reads of 180 tensors (the check, then the copy) in fewer reads than one per tensor
    // each: the small ones share; the 1.5 MiB ones read alone (in 1 MiB pieces when hashed).
    REQUIRE(stats.chunks < 2 * 180);
  }
}

TEST_CASE("a flipped byte in a small tensor that shares its read is refused, naming it",
          "[resume]") {
  LayerList l;
  save_layer_list(&l);
  auto m = store::read_manifest(Env::posix(), l.step_dir, 0);
  REQUIRE(m.is_ok());
  // A 16 KiB exp_avg with small neighbours on both sides in the file.
  const ManifestEntry* victim = nullptr;
  for (const auto& e : m->tensors) {
    if (e.path == "/optimizer/state/p121/exp_avg") victim = &e;
  }
  REQUIRE(victim != nullptr);
  REQUIRE(victim->nbytes == (16u << 10));
  resume_test::flip_bit(path_join(l.step_dir, m->file), victim->offset + 5000);
  for (unsigned threads : {1u, 2u}) {
    RestoreOptions o = as_restore_latest(l, threads);
    Live live(l, &o);
    auto got = restore_rank(Env::posix(), l.step_dir, 0, o);
    INFO(got.status().to_string());
    REQUIRE(got.status().code() == Code::kCorrupt);
    REQUIRE(got.status().message().find("tensor \"/optimizer/state/p121/exp_avg\"") == 0);
    REQUIRE(got.status().message().find("xxh3 mismatch") != std::string::npos);
    REQUIRE(live.all_zero());  // checked first: nothing live written
  }
  auto loaded = load_all_host(Env::posix(), l.step_dir, {});
  REQUIRE(loaded.status().code() == Code::kCorrupt);
  REQUIRE(loaded.status().message().find("/optimizer/state/p121/exp_avg") != std::string::npos);
}

TEST_CASE("load_all_host reads every tensor into its arena and times the allocation apart",
          "[resume]") {
  LayerList l;
  save_layer_list(&l);
  uint64_t bytes = 0;
  for (const auto& [path, b] : l.saved) bytes += b->size();
  for (bool verify : {true, false}) {
    LoadAllOptions o;
    o.verify_hashes = verify;
    auto got = load_all_host(Env::posix(), l.step_dir, o);
    INFO(got.status().to_string());
    REQUIRE(got.is_ok());
    REQUIRE(got->bytes == bytes);
    REQUIRE(got->tensors == 180);
    REQUIRE(got->seconds > 0);
    REQUIRE(got->alloc_seconds > 0);
  }
}

TEST_CASE("tensors the restored tree owns are 64-byte aligned, as torch allocates", "[resume]") {
  LayerList l;
  save_layer_list(&l);
  RestoreOptions o;
  check_whole_file(l.listed, &o);
  auto got = restore_rank(Env::posix(), l.step_dir, 0, o);
  REQUIRE(got.is_ok());
  size_t seen = 0;
  for (const auto& [path, b] : l.saved) {
    const Tensor* t = store::find_tensor(&*got, path);
    REQUIRE(t != nullptr);
    INFO(path);
    REQUIRE(reinterpret_cast<uintptr_t>(t->data) % 64 == 0);
    REQUIRE(std::memcmp(t->data, b->data(), b->size()) == 0);
    ++seen;
  }
  REQUIRE(seen == 180);
}

// Counts the reads made through it.
class CountingFile final : public RandomAccessFile {
 public:
  explicit CountingFile(std::unique_ptr<RandomAccessFile> f) : f_(std::move(f)) {}
  Status read_at(uint64_t offset, void* dst, size_t n) const override {
    ++reads;
    return f_->read_at(offset, dst, n);
  }
  uint64_t size() const override { return f_->size(); }
  const std::string& path() const override { return f_->path(); }
  mutable size_t reads = 0;

 private:
  std::unique_ptr<RandomAccessFile> f_;
};

TEST_CASE("the bytes between many small tensors are hashed in a few reads", "[resume]") {
  LayerList l;
  save_layer_list(&l);
  auto m = store::read_manifest(Env::posix(), l.step_dir, 0);
  REQUIRE(m.is_ok());
  size_t gaps = 0, large = 0;  // tensors of more than 32 KiB end a read
  for (const FileRegion& r : file_regions(*m, m->file_bytes)) {
    gaps += r.tensor ? 0 : 1;
    large += r.tensor && r.nbytes > (32u << 10) ? 1 : 0;
  }
  const std::string file = path_join(l.step_dir, m->file);
  auto open = [&] {
    auto f = Env::posix()->open_random(file);
    REQUIRE(f.is_ok());
    return std::make_unique<CountingFile>(std::move(*f));
  };
  auto f = open();
  auto digest = store::regions_digest_of(*f, *m, m->file_bytes);
  REQUIRE(digest.is_ok());
  REQUIRE(digest.value() == l.listed.regions_xxh3.value());
  INFO(gaps << " gaps, " << large << " large tensors, " << f->reads << " reads");
  REQUIRE(gaps > large + 1);
  REQUIRE(f->reads <= large + 1);  // one per run of small tensors; it was one per gap
  // A flipped bit in a gap read together with others changes the digest.
  resume_test::flip_bit(file, resume_test::padding_offset(*m));
  auto g = open();
  auto damaged = store::regions_digest_of(*g, *m, m->file_bytes);
  REQUIRE(damaged.is_ok());
  REQUIRE(damaged.value() != digest.value());
}

TEST_CASE("small tensors that share a read land straight in their destinations", "[resume]") {
  LayerList l;
  save_layer_list(&l);
  for (unsigned threads : {1u, 3u}) {
    // restore_latest's copy read, and one verified read (load-bench's): one preadv per run of
    // small tensors into the caller's memory, no staging copy; every byte still arrives and the
    // one-read restore hashes each tensor where it landed.
    for (bool check_first : {true, false}) {
      RestoreOptions o = as_restore_latest(l, threads);
      o.check_first = check_first;
      Live live(l, &o);
      RestoreStats stats;
      auto got = restore_rank(Env::posix(), l.step_dir, 0, o, &stats);
      INFO(got.status().to_string() << ", check_first " << check_first);
      REQUIRE(got.is_ok());
      REQUIRE(stats.scattered > 0);
      for (const auto& [path, b] : live.bytes) {
        INFO(path);
        REQUIRE(b == *l.saved.at(path));
      }
    }
  }
  // A flipped byte in a tensor read that way: refused naming it, and an Undo puts back the old
  // bytes of every tensor the scattered reads overwrote.
  auto m = store::read_manifest(Env::posix(), l.step_dir, 0);
  REQUIRE(m.is_ok());
  for (const auto& e : m->tensors) {
    if (e.path == "/optimizer/state/p121/exp_avg") {
      resume_test::flip_bit(path_join(l.step_dir, m->file), e.offset + 5000);
    }
  }
  RestoreOptions o = as_restore_latest(l, 2);
  o.check_first = false;
  Undo undo;
  o.undo = &undo;
  Live live(l, &o);
  for (auto& [path, v] : live.bytes) std::fill(v.begin(), v.end(), 0x5a);
  RestoreStats stats;
  auto got = restore_rank(Env::posix(), l.step_dir, 0, o, &stats);
  REQUIRE(got.status().code() == Code::kCorrupt);
  REQUIRE(got.status().message().find("tensor \"/optimizer/state/p121/exp_avg\"") == 0);
  for (const auto& [path, v] : live.bytes) {
    INFO(path);
    REQUIRE(std::all_of(v.begin(), v.end(), [](unsigned char c) { return c == 0x5a; }));
  }
}

TEST_CASE("read_scatter_at fills many spans as read_at does, and refuses past the end",
          "[resume]") {
  resume_test::TempDir dir;
  const std::string path = path_join(dir.path(), "bytes");
  std::string bytes(3u << 20, '\0');
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<char>(i * 131 + (i >> 12));
  REQUIRE(Env::posix()->write_atomic(path, bytes).is_ok());
  auto posix = Env::posix()->open_random(path);
  REQUIRE(posix.is_ok());
  auto mem = memory_file("mem", bytes);
  for (const RandomAccessFile* f : {posix->get(), mem.get()}) {
    // 3000 spans (more than one preadv's IOV_MAX), empty ones among them.
    std::vector<std::vector<char>> out;
    std::vector<ReadSpan> spans;
    uint64_t total = 0;
    for (size_t k = 0; k < 3000; ++k) {
      out.emplace_back(k % 7 == 3 ? 0 : 1 + (k * 97) % 900);
      total += out.back().size();
    }
    for (auto& o : out) spans.push_back({o.data(), o.size()});
    const uint64_t at = 12345;
    REQUIRE(f->read_scatter_at(at, spans.data(), spans.size()).is_ok());
    std::string got;
    for (const auto& o : out) got.append(o.data(), o.size());
    REQUIRE(got == bytes.substr(at, total));
    auto past = f->read_scatter_at(bytes.size() - total + 1, spans.data(), spans.size());
    REQUIRE(past.code() == Code::kCorrupt);
    REQUIRE(past.message().find("truncated") != std::string::npos);
  }
}

}  // namespace
}  // namespace ckpt::resume::small_tensors_test
