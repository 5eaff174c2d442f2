// The write pass of write_rank and what commit() takes from it: the whole-file hashes computed
// while writing are the files' real hashes, commit() never reads a rank file back, and
// checkpoints whose manifests predate `file_xxh3` still commit, verify and restore.
#include <catch2/catch.hpp>
#include <cstring>
#include <mutex>
#include <nlohmann/json.hpp>

#include "ckpt/base/hash.h"
#include "ckpt/format/regions.h"
#include "ckpt/io/env_wrapper.h"
#include "ckpt/io/fault_injection_env.h"
#include "ckpt/store/direct_writer.h"
#include "ckpt/store/rank_io.h"
#include "ckpt/store/run_dir.h"
#include "tests/common/test_util.h"

namespace ckpt::write_pass_test {
namespace {

using testing::TempDir;

// The real filesystem, except that opening a rank file (*.h5) for reading fails: whatever
// succeeds through it did not read a rank file.
class NoRankReadsEnv final : public EnvWrapper {
 public:
  NoRankReadsEnv() : EnvWrapper(Env::posix()) {}
  Result<std::unique_ptr<RandomAccessFile>> open_random(const std::string& p) override {
    if (p.size() > 3 && p.compare(p.size() - 3, 3, ".h5") == 0) {
      ++refused;
      return io_error(p + ": this test's Env refuses to read rank files");
    }
    return EnvWrapper::open_random(p);
  }
  // Direct handles that open but whose writes fail, as on filesystems that take O_DIRECT at
  // open and refuse it at the first write.
  Result<std::unique_ptr<WritableFile>> open_for_direct_update(const std::string& p) override {
    if (!break_direct_writes) return Env::posix_direct_io()->open_for_direct_update(p);
    class Refusing final : public WritableFile {
     public:
      Status append(const void*, size_t) override { return io_error("EINVAL"); }
      Status write_at(uint64_t, const void*, size_t) override { return io_error("EINVAL"); }
      Status sync() override { return Status::ok(); }
      Status close() override { return Status::ok(); }
    };
    return std::unique_ptr<WritableFile>(new Refusing);
  }
  int refused = 0;
  bool break_direct_writes = false;
};

struct Run {
  TempDir tmp;
  std::vector<std::vector<unsigned char>> storage;
  std::string dir(int64_t step) const { return path_join(tmp.path(), step_dir_name(step)); }
};

// Writes rank `rank` of `world` for `step` through the real Env; returns its stats. `extra`
// more small tensors make HDF5 put structure between and after the extents too.
store::RankWriteStats write(Run* run, int64_t step, int64_t rank, int64_t world, int extra = 0,
                            Env* env = Env::posix()) {
  Node root = testing::sample_tree(&run->storage);
  root.attrs["step"] = step;
  for (int i = 0; i < extra; ++i) {
    run->storage.emplace_back(static_cast<size_t>(4 * (i + 1)), static_cast<unsigned char>(i));
    root.child("model").tensors["extra" + std::to_string(i)] =
        Tensor::borrow(DType::kFloat32, {i + 1}, run->storage.back().data(), 4 * (i + 1));
  }
  REQUIRE(Env::posix()->make_dirs(run->dir(step)).is_ok());
  store::RankWriteStats stats;
  auto m = store::write_rank(env, run->dir(step), rank, step, world, &root, &stats);
  REQUIRE(m.is_ok());
  REQUIRE(m->file_xxh3.has_value());
  REQUIRE(*m->file_xxh3 == stats.file_xxh3);
  return stats;
}

uint64_t real_hash(const std::string& path) {
  auto h = store::hash_file(Env::posix(), path);
  REQUIRE(h.is_ok());
  return *h;
}

TEST_CASE("the write pass's whole-file hashes are the files' real hashes", "[store]") {
  Run run;
  const int extra = GENERATE(0, 300);
  Env* env = GENERATE(Env::posix(), Env::posix_direct_io());
  const store::RankWriteStats st = write(&run, 3, 0, 1, extra, env);
  const std::string file = path_join(run.dir(3), rank_file_name(0));
  const std::string manifest = path_join(run.dir(3), rank_manifest_name(0));
  REQUIRE(st.file_xxh3 == real_hash(file));
  REQUIRE(st.file_bytes == *Env::posix()->file_size(file));
  REQUIRE(st.manifest_xxh3 == real_hash(manifest));
  REQUIRE(st.manifest_bytes == *Env::posix()->file_size(manifest));
  REQUIRE(st.tensors > 5);

  REQUIRE(store::commit(Env::posix(), run.tmp.path(), 3, 1, {"model", "optimizer"}).is_ok());
  auto rec = store::read_commit(Env::posix(), run.dir(3));
  REQUIRE(rec.is_ok());
  REQUIRE(rec->files.size() == 2);
  for (const CommitFile& f : rec->files) {
    INFO(f.name);
    REQUIRE(f.xxh3 == real_hash(path_join(run.dir(3), f.name)));
    REQUIRE(f.bytes == *Env::posix()->file_size(path_join(run.dir(3), f.name)));
  }
  REQUIRE(store::verify_checkpoint(Env::posix(), run.dir(3)).problems.empty());
}

TEST_CASE("commit reads no rank file, for this process's ranks and the others'", "[store]") {
  Run run;
  write(&run, 4, 0, 2);
  write(&run, 4, 1, 2);  // as another process would have, before the barrier
  NoRankReadsEnv env;
  REQUIRE(store::commit(&env, run.tmp.path(), 4, 2, {"model", "optimizer"}).is_ok());
  REQUIRE(env.refused == 0);
  auto rec = store::read_commit(Env::posix(), run.dir(4));
  REQUIRE(rec.is_ok());
  REQUIRE(rec->files.size() == 4);
  for (const CommitFile& f : rec->files) {
    INFO(f.name);
    REQUIRE(f.xxh3 == real_hash(path_join(run.dir(4), f.name)));
  }
  REQUIRE(store::verify_checkpoint(Env::posix(), run.dir(4)).problems.empty());
}

// Rewrites rank 0's manifest as a writer from before `file_xxh3` (and `regions_xxh3`) wrote it.
void strip_file_hash(const std::string& step_dir) {
  const std::string p = path_join(step_dir, rank_manifest_name(0));
  auto m = decode_manifest(testing::read_file(p), p);
  REQUIRE(m.is_ok());
  m->file_xxh3.reset();
  m->regions_xxh3.reset();
  const std::string old = encode_manifest(*m);
  REQUIRE(old.find("file_xxh3") == std::string::npos);
  REQUIRE(nlohmann::json::parse(old).size() == 9);  // the nine fields of the first version
  testing::write_file(p, old);
}

TEST_CASE("a checkpoint whose manifest has no file_xxh3 commits, verifies and restores",
          "[store]") {
  Run run;
  write(&run, 5, 0, 1);
  strip_file_hash(run.dir(5));
  NoRankReadsEnv no_reads;  // without the field commit must hash the rank file itself
  REQUIRE_FALSE(store::commit(&no_reads, run.tmp.path(), 5, 1, {"model", "optimizer"}).is_ok());
  REQUIRE(no_reads.refused == 1);
  REQUIRE(store::commit(Env::posix(), run.tmp.path(), 5, 1, {"model", "optimizer"}).is_ok());
  auto rec = store::read_commit(Env::posix(), run.dir(5));
  REQUIRE(rec.is_ok());
  for (const CommitFile& f : rec->files) {
    REQUIRE(f.xxh3 == real_hash(path_join(run.dir(5), f.name)));
  }
  REQUIRE(store::verify_checkpoint(Env::posix(), run.dir(5)).problems.empty());
  auto root = store::read_rank(Env::posix(), run.dir(5), 0);
  REQUIRE(root.is_ok());
  std::vector<std::vector<unsigned char>> again;
  const Node want = testing::sample_tree(&again);
  const Tensor* w = store::find_tensor(const_cast<Node*>(&want), "/model/layer.weight");
  const Tensor* got = store::find_tensor(&*root, "/model/layer.weight");
  REQUIRE(w != nullptr);
  REQUIRE(got != nullptr);
  REQUIRE(got->nbytes == w->nbytes);
  REQUIRE(std::memcmp(got->data, w->data, w->nbytes) == 0);

  // ...and the flip harness holds for it: a flipped bit of the rank file, or a truncation.
  const std::string f = path_join(run.dir(5), rank_file_name(0));
  const std::string pristine = testing::read_file(f);
  for (size_t off : {size_t{0}, pristine.size() / 2, pristine.size() - 1}) {
    std::string bad = pristine;
    bad[off] = static_cast<char>(bad[off] ^ 0x10);
    testing::write_file(f, bad);
    REQUIRE_FALSE(store::verify_checkpoint(Env::posix(), run.dir(5)).problems.empty());
  }
  testing::write_file(f, pristine.substr(0, pristine.size() - 1));
  REQUIRE_FALSE(store::verify_checkpoint(Env::posix(), run.dir(5)).problems.empty());
}

TEST_CASE("verify catches a damaged file_xxh3 and any flip of each file", "[store]") {
  Run run;
  write(&run, 6, 0, 1);
  REQUIRE(store::commit(Env::posix(), run.tmp.path(), 6, 1, {"model", "optimizer"}).is_ok());
  const std::string mpath = path_join(run.dir(6), rank_manifest_name(0));
  const std::string pristine = testing::read_file(mpath);
  const size_t at = pristine.find("\"file_xxh3\": \"");
  REQUIRE(at != std::string::npos);
  for (size_t k = 0; k < 16; ++k) {  // every hex digit of the stored hash, one at a time
    std::string bad = pristine;
    char& c = bad[at + 14 + k];
    c = c == '0' ? '1' : '0';
    testing::write_file(mpath, bad);
    INFO("digit " << k);
    REQUIRE_FALSE(store::verify_checkpoint(Env::posix(), run.dir(6)).problems.empty());
  }
  testing::write_file(mpath, pristine);
  for (const std::string& name : {rank_file_name(0), rank_manifest_name(0)}) {
    const std::string p = path_join(run.dir(6), name);
    const std::string bytes = testing::read_file(p);
    for (size_t off = 0; off < bytes.size(); off += bytes.size() / 61 + 1) {
      std::string bad = bytes;
      bad[off] = static_cast<char>(bad[off] ^ (1 << (off % 8)));
      testing::write_file(p, bad);
      INFO(name << " offset " << off);
      REQUIRE_FALSE(store::verify_checkpoint(Env::posix(), run.dir(6)).problems.empty());
    }
    testing::write_file(p, bytes.substr(0, bytes.size() - 1));
    REQUIRE_FALSE(store::verify_checkpoint(Env::posix(), run.dir(6)).problems.empty());
    testing::write_file(p, bytes);
  }
  REQUIRE(store::verify_checkpoint(Env::posix(), run.dir(6)).problems.empty());
}

TEST_CASE("direct-I/O bodies and buffered tails land bit-exactly, as with pwrite alone",
          "[store]") {
  Run run;
  Node root;
  // Bigger than a bounce chunk, with a tail that is not a multiple of the block size; one
  // exactly aligned; one smaller than a block.
  for (size_t n : {size_t{(5u << 20) + 100}, size_t{3u << 20}, size_t{1000}}) {
    run.storage.emplace_back(n);
    for (size_t i = 0; i < n; ++i) run.storage.back()[i] = static_cast<unsigned char>(i * 131 + n);
    root.child("model").tensors["t" + std::to_string(n)] =
        Tensor::borrow(DType::kUInt8, {static_cast<int64_t>(n)}, run.storage.back().data(), n);
  }
  root.attrs["step"] = int64_t{8};
  FaultInjectionEnv buffered_only(Env::posix_direct_io());  // has no direct I/O: pwrite
  NoRankReadsEnv broken_direct;
  broken_direct.break_direct_writes = true;
  for (Env* env : {Env::posix_direct_io(), Env::posix(), static_cast<Env*>(&buffered_only),
                   static_cast<Env*>(&broken_direct)}) {
    TempDir tmp;
    const std::string dir = path_join(tmp.path(), step_dir_name(8));
    REQUIRE(env->make_dirs(dir).is_ok());
    store::RankWriteStats st;
    REQUIRE(store::write_rank(env, dir, 0, 8, 1, &root, &st).is_ok());
    if (env == &buffered_only || env == Env::posix()) REQUIRE_FALSE(st.direct_io);
    if (env == &broken_direct) REQUIRE_FALSE(st.direct_io);  // the retry went through pwrite
    if (env == Env::posix_direct_io() && !st.direct_io) WARN("no direct I/O on " << tmp.path());
    REQUIRE(st.file_xxh3 == real_hash(path_join(dir, rank_file_name(0))));
    REQUIRE(store::commit(env, tmp.path(), 8, 1, {"model"}).is_ok());
    REQUIRE(store::verify_checkpoint(Env::posix(), dir).problems.empty());
    auto back = store::read_rank(Env::posix(), dir, 0);
    REQUIRE(back.is_ok());
    for (const auto& [name, t] : root.child("model").tensors) {
      const Tensor* got = store::find_tensor(&*back, "/model/" + name);
      REQUIRE(got != nullptr);
      REQUIRE(got->nbytes == t.nbytes);
      REQUIRE(std::memcmp(got->data, t.data, t.nbytes) == 0);
    }
  }
}

TEST_CASE("a state under 4 MiB of tensors is written through the page cache", "[store]") {
  // Direct I/O's handles, writer threads and bounce buffers cost more than they save there
  // (issue 29 item 8); the state of the test above (8 MiB) still takes the direct path.
  Run run;
  const store::RankWriteStats st = write(&run, 3, 0, 1, 300, Env::posix_direct_io());
  CHECK_FALSE(st.direct_io);
  REQUIRE(st.file_xxh3 == real_hash(path_join(run.dir(3), rank_file_name(0))));
}

// Handles on one file in memory that fail its `fail_at`-th write (1-based, over all handles;
// 0 = never).
class RecordingFile final : public WritableFile {
 public:
  RecordingFile(std::string* bytes, std::mutex* mu, int* writes, int fail_at)
      : bytes_(bytes), mu_(mu), writes_(writes), fail_at_(fail_at) {}
  Status append(const void*, size_t) override { return internal_error("not used"); }
  Status write_at(uint64_t offset, const void* data, size_t n) override {
    std::lock_guard<std::mutex> lock(*mu_);
    if (++*writes_ == fail_at_) return io_error("disk on fire");
    if (bytes_->size() < offset + n) bytes_->resize(offset + n);
    std::memcpy(&(*bytes_)[offset], data, n);
    return Status::ok();
  }
  Status sync() override { return Status::ok(); }
  Status close() override { return Status::ok(); }

 private:
  std::string* bytes_;
  std::mutex* mu_;
  int* writes_;
  int fail_at_;
};

struct MemFile {
  std::string bytes;
  std::mutex mu;
  int writes = 0;
};

std::vector<std::unique_ptr<WritableFile>> files(MemFile* f, int fail_at) {
  std::vector<std::unique_ptr<WritableFile>> out;
  for (size_t k = 0; k < store::DirectWriter::kWriters; ++k)
    out.push_back(std::make_unique<RecordingFile>(&f->bytes, &f->mu, &f->writes, fail_at));
  return out;
}

TEST_CASE("write_gather_at writes many spans as write_at does", "[store]") {
  TempDir tmp;
  const std::string path = path_join(tmp.path(), "bytes");
  // 3000 spans (more than one pwritev's IOV_MAX), empty ones among them.
  std::vector<std::string> parts;
  std::string want;
  for (size_t k = 0; k < 3000; ++k) {
    parts.emplace_back(k % 7 == 3 ? 0 : 1 + (k * 97) % 900, static_cast<char>('a' + k % 26));
    want += parts.back();
  }
  std::vector<WriteSpan> spans;
  for (const auto& p : parts) spans.push_back({p.data(), p.size()});
  const uint64_t at = 12345;
  REQUIRE(Env::posix()->write_atomic(path, std::string(at, '\x01')).is_ok());
  auto f = Env::posix()->open_for_update(path);
  REQUIRE(f.is_ok());
  REQUIRE((*f)->write_gather_at(at, spans.data(), spans.size()).is_ok());
  REQUIRE((*f)->close().is_ok());
  const std::string got = testing::read_file(path);
  REQUIRE(got.size() == at + want.size());
  CHECK(got.substr(0, at) == std::string(at, '\x01'));
  CHECK(got.substr(at) == want);
  // The default (one write_at per span), as Envs without pwritev have it.
  MemFile mem;
  RecordingFile rec(&mem.bytes, &mem.mu, &mem.writes, 0);
  REQUIRE(rec.write_gather_at(at, spans.data(), spans.size()).is_ok());
  CHECK(mem.bytes.substr(at) == want);
}

TEST_CASE("many small tensors are written in a few gathered writes, bit-exactly", "[store]") {
  // The write pass gathers consecutive tensors, with the zeros between their 4 KiB-aligned
  // extents, into one pwritev (issue 29 item 8: a 3 MB state of 208 tensors took 216 writes).
  Run run;
  const store::RankWriteStats st = write(&run, 4, 0, 1, 300, Env::posix());
  CHECK_FALSE(st.direct_io);
  REQUIRE(st.file_xxh3 == real_hash(path_join(run.dir(4), rank_file_name(0))));
  REQUIRE(store::commit(Env::posix(), run.tmp.path(), 4, 1, {"model", "optimizer"}).is_ok());
  const store::VerifyReport rep = store::verify_checkpoint(Env::posix(), run.dir(4));
  INFO((rep.problems.empty() ? std::string() : rep.problems.front()));
  CHECK(rep.problems.empty());
}

TEST_CASE("DirectWriter writes every piece where it was put and never loses an error", "[store]") {
  const size_t block = Env::kDirectIoAlignment;
  std::vector<unsigned char> src(store::DirectWriter::kChunk + 3 * block);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<unsigned char>(i * 7 + i / 4096);
  const int pieces = 12;  // more than the ring holds, in two sizes
  auto piece = [&](int k) { return k % 2 ? store::DirectWriter::kChunk : 3 * block; };
  auto from = [&](int k) { return src.data() + (k % 3) * block; };  // source of piece k
  for (int fail_at : {0, 1, 5, pieces}) {
    MemFile mem;
    const std::string& bytes = mem.bytes;
    store::DirectWriter w(files(&mem, fail_at));
    Status first;
    uint64_t off = 0;
    for (int k = 0; k < pieces; ++k) {
      auto copy = w.put(off, from(k), piece(k));
      if (!copy.is_ok() && first.is_ok()) first = copy.status();
      if (copy.is_ok()) {
        REQUIRE(std::memcmp(*copy, from(k), piece(k)) == 0);
      }
      off += piece(k);
    }
    Status done = w.finish();
    INFO("fail_at " << fail_at);
    if (fail_at == 0) {
      REQUIRE(done.is_ok());
      REQUIRE(bytes.size() == off);
      uint64_t at = 0;
      for (int k = 0; k < pieces; ++k) {
        REQUIRE(std::memcmp(&bytes[at], from(k), piece(k)) == 0);
        at += piece(k);
      }
    } else {
      REQUIRE(done.code() == Code::kIoError);
      REQUIRE(done.message() == "disk on fire");
      REQUIRE((first.is_ok() || first.message() == "disk on fire"));
    }
  }
  MemFile unused;
  store::DirectWriter w(files(&unused, 0));
  REQUIRE(w.put(100, src.data(), block).status().code() == Code::kInternal);  // unaligned
}

// The region digest recomputed from nothing but the file's bytes and the manifest's extents.
uint64_t regions_from_bytes(const std::string& file, const Manifest& m) {
  const std::string bytes = testing::read_file(file);
  std::vector<FileRegion> regions = file_regions(m, bytes.size());
  for (FileRegion& r : regions) {
    const uint64_t h = xxh3_64(bytes.data() + r.offset, r.nbytes);
    if (r.tensor) REQUIRE(h == r.xxh3);  // the manifest's tensor hash is the bytes' hash
    r.xxh3 = h;
  }
  return regions_digest(regions);
}

TEST_CASE("the region digest of manifest and commit record is the one of the file's bytes",
          "[store]") {
  for (int extra : {0, 7}) {
    Run run;
    write(&run, 6, 0, 1, extra);
    REQUIRE(store::commit(Env::posix(), run.tmp.path(), 6, 1, {"model", "optimizer"}).is_ok());
    auto m = store::read_manifest(Env::posix(), run.dir(6), 0);
    REQUIRE(m.is_ok());
    REQUIRE(m->regions_xxh3.has_value());
    const std::string file = path_join(run.dir(6), rank_file_name(0));
    REQUIRE(*m->regions_xxh3 == regions_from_bytes(file, *m));
    size_t gaps = 0;
    for (const FileRegion& r : file_regions(*m, m->file_bytes)) gaps += r.tensor ? 0 : 1;
    REQUIRE(gaps >= 2);  // HDF5 metadata before the first tensor, and more after
    auto rec = store::read_commit(Env::posix(), run.dir(6));
    REQUIRE(rec.is_ok());
    for (const CommitFile& f : rec->files) {
      INFO(f.name);
      if (f.name == rank_file_name(0)) {
        REQUIRE(f.regions_xxh3 == m->regions_xxh3);
      } else {
        REQUIRE_FALSE(f.regions_xxh3.has_value());  // the manifest has none
      }
    }
    // A flipped byte outside every tensor changes it; so does one inside a tensor.
    std::string bytes = testing::read_file(file);
    bytes[1] = static_cast<char>(bytes[1] ^ 1);
    testing::write_file(file, bytes);
    REQUIRE(regions_digest(file_regions(*m, m->file_bytes)) != *m->regions_xxh3);
    std::vector<FileRegion> regions = file_regions(*m, bytes.size());
    for (FileRegion& r : regions) {
      if (!r.tensor) r.xxh3 = xxh3_64(bytes.data() + r.offset, r.nbytes);
    }
    REQUIRE(regions_digest(regions) != *m->regions_xxh3);
  }
}

TEST_CASE("verify reports a commit record whose region digest does not fit the file", "[store]") {
  Run run;
  write(&run, 7, 0, 1, 3);
  REQUIRE(store::commit(Env::posix(), run.tmp.path(), 7, 1, {"model", "optimizer"}).is_ok());
  REQUIRE(store::verify_checkpoint(Env::posix(), run.dir(7)).problems.empty());
  auto rec = store::read_commit(Env::posix(), run.dir(7));
  REQUIRE(rec.is_ok());
  for (CommitFile& f : rec->files) {
    if (f.regions_xxh3) f.regions_xxh3 = *f.regions_xxh3 ^ 1;  // re-signed: only this is wrong
  }
  testing::write_file(path_join(run.dir(7), "COMMIT.json"), encode_commit(*rec));
  const auto problems = store::verify_checkpoint(Env::posix(), run.dir(7)).problems;
  REQUIRE(problems.size() == 1);
  REQUIRE(problems[0].find("rank-00000.h5: region digest of the file is ") != std::string::npos);
}

}  // namespace
}  // namespace ckpt::write_pass_test
