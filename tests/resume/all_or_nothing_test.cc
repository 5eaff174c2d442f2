// The restore pipeline's whole-file hash (read_plan.h cover_file, pipeline.h step 4) and its
// undo of caller memory (restore.h): a file whose only damage is outside every tensor is refused,
// and a failed restore leaves destinations bitwise as they were.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstring>

#include "ckpt/base/hash.h"
#include "ckpt/io/mapped_file.h"
#include "ckpt/store/rank_io.h"
#include "ckpt/store/run_dir.h"
#include "resume/read_plan.h"
#include "resume/restore.h"
#include "resume_test_util.h"

namespace ckpt::resume::all_or_nothing_test {
namespace {

struct Saved {
  resume_test::TempDir dir;
  std::vector<std::vector<unsigned char>> storage;
  Node tree;
  Manifest manifest;
  std::string file;
  uint64_t file_xxh3 = 0;
};

void save(Saved* s) {
  s->tree = resume_test::varied_tree(&s->storage);
  auto m = store::write_rank(Env::posix(), s->dir.path(), 0, 42, 1, &s->tree);
  REQUIRE(m.is_ok());
  s->manifest = *m;
  s->file = path_join(s->dir.path(), rank_file_name(0));
  auto h = store::hash_file(Env::posix(), s->file);
  REQUIRE(h.is_ok());
  s->file_xxh3 = *h;
}

RestoreOptions with_file_hash(const Saved& s) {
  RestoreOptions o;
  o.check_file_hash = true;
  o.file_bytes = s.manifest.file_bytes;
  o.file_xxh3 = s.file_xxh3;
  return o;
}

TEST_CASE("cover_file tiles the whole file with the plan's chunks in order", "[resume]") {
  Saved s;
  save(&s);
  for (uint64_t chunk : {4096ull, 65536ull, 1ull << 20}) {
    std::vector<size_t> model_only;
    for (size_t i = 0; i < s.manifest.tensors.size(); ++i) {
      if (s.manifest.tensors[i].path.rfind("/model/", 0) == 0) model_only.push_back(i);
    }
    PlanOptions po;
    po.chunk_bytes = chunk;
    auto plan = make_read_plan(s.manifest, model_only, po);
    REQUIRE(plan.is_ok());
    const size_t pieces = plan->pieces.size();
    REQUIRE(cover_file(&*plan, s.manifest.file_bytes, s.file).is_ok());
    uint64_t at = 0;
    for (const PlanChunk& c : plan->chunks) {
      REQUIRE(c.offset == at);
      REQUIRE(c.nbytes <= chunk);
      at += c.nbytes;
    }
    REQUIRE(at == s.manifest.file_bytes);
    REQUIRE(plan->pieces.size() == pieces);
    uint32_t next = 0;  // units still list consecutive chunks
    for (const PlanUnit& u : plan->units) {
      REQUIRE(u.first_chunk == next);
      next += u.chunk_count;
    }
    REQUIRE(next == plan->chunks.size());
    REQUIRE_FALSE(cover_file(&*plan, s.manifest.file_bytes - 1, s.file).is_ok());
  }
}

TEST_CASE("the whole-file hash streamed from the reads equals the commit's", "[resume]") {
  Saved s;
  save(&s);
  auto ref = store::read_rank(Env::posix(), s.dir.path(), 0);
  REQUIRE(ref.is_ok());
  for (unsigned threads : {1u, 2u, 3u, 8u}) {
    for (uint64_t chunk : {4096ull, 65536ull, 1ull << 20}) {
      RestoreOptions o = with_file_hash(s);
      o.io_threads = threads;
      o.chunk_bytes = chunk;
      RestoreStats stats;
      auto got = restore_rank(Env::posix(), s.dir.path(), 0, o, &stats);
      INFO("threads " << threads << " chunk " << chunk << ": " << got.status().to_string());
      REQUIRE(got.is_ok());
      REQUIRE(resume_test::compare_trees(*ref, *got).empty());
      REQUIRE(stats.read_bytes == s.manifest.file_bytes);  // every byte once
      o.components = {Component::kOptimizer};  // the model's bytes are read for the hash, not kept
      REQUIRE(restore_rank(Env::posix(), s.dir.path(), 0, o).is_ok());
      o.file_xxh3 ^= 1;
      auto wrong = restore_rank(Env::posix(), s.dir.path(), 0, o);
      REQUIRE(wrong.status().code() == Code::kCorrupt);
    }
  }
}

TEST_CASE("a flipped byte in HDF5 padding fails the whole-file hash, naming the file", "[resume]") {
  Saved s;
  save(&s);
  resume_test::flip_bit(s.file, resume_test::padding_offset(s.manifest));
  REQUIRE(restore_rank(Env::posix(), s.dir.path(), 0).is_ok());  // every tensor is intact
  for (unsigned threads : {1u, 4u}) {
    RestoreOptions o = with_file_hash(s);
    o.io_threads = threads;
    auto got = restore_rank(Env::posix(), s.dir.path(), 0, o);
    INFO(got.status().to_string());
    REQUIRE(got.status().code() == Code::kCorrupt);
    REQUIRE(got.status().message().find(s.file +
                                        ": whole-file xxh3 mismatch (commit record: "
                                        "expected " +
                                        hex64(s.file_xxh3)) == 0);
  }
  RestoreOptions off = with_file_hash(s);
  off.verify_hashes = false;  // unverified means no hash at all
  REQUIRE(restore_rank(Env::posix(), s.dir.path(), 0, off).is_ok());
  RestoreOptions size = with_file_hash(s);
  size.file_bytes += 1;
  REQUIRE(restore_rank(Env::posix(), s.dir.path(), 0, size).status().code() == Code::kCorrupt);
}

RestoreOptions with_regions(const Saved& s) {
  RestoreOptions o = with_file_hash(s);
  REQUIRE(s.manifest.regions_xxh3.has_value());
  o.file_regions_xxh3 = s.manifest.regions_xxh3;
  return o;
}

// Caller memory for every model tensor, filled with a pattern.
struct Destinations {
  std::map<std::string, std::vector<unsigned char>> bytes;
  Destinations(const Manifest& m, RestoreOptions* o) {
    for (const auto& e : m.tensors) {
      if (e.path.rfind("/model/", 0) != 0 && e.path.rfind("/optimizer/", 0) != 0) continue;
      auto& b = bytes[e.path];
      b.resize(e.nbytes);
      for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<unsigned char>(i * 7 + 3);
      o->destinations[e.path] = {b.data(), b.size()};
    }
  }
  bool untouched() const {
    for (const auto& [path, b] : bytes) {
      if (!untouched(path)) return false;
    }
    return true;
  }
  bool untouched(const std::string& path) const {
    const auto& b = bytes.at(path);
    for (size_t i = 0; i < b.size(); ++i) {
      if (b[i] != static_cast<unsigned char>(i * 7 + 3)) return false;
    }
    return true;
  }
};

// A saved file with one flipped bit: in its HDF5 padding, or in the last byte of the tensor that
// comes last in the file (so it fails after every other destination could have been filled).
void save_damaged(Saved* s, bool padding) {
  save(s);
  const ManifestEntry* last = &s->manifest.tensors.front();
  for (const auto& e : s->manifest.tensors) {
    if (e.nbytes > 0 && e.offset > last->offset) last = &e;
  }
  resume_test::flip_bit(s->file, padding ? resume_test::padding_offset(s->manifest)
                                         : last->offset + last->nbytes - 1);
}

TEST_CASE("a failed restore leaves every destination bitwise as it was", "[resume]") {
  // The last tensor in the file fails after every other destination was filled.
  for (bool padding : {false, true}) {
    for (unsigned threads : {1u, 3u}) {
      Saved s;
      save_damaged(&s, padding);
      RestoreOptions o = with_file_hash(s);
      o.io_threads = threads;
      o.chunk_bytes = 65536;
      Destinations d(s.manifest, &o);
      Undo undo;
      o.undo = &undo;
      auto got = restore_rank(Env::posix(), s.dir.path(), 0, o);
      INFO(got.status().to_string());
      REQUIRE(got.status().code() == Code::kCorrupt);
      REQUIRE(d.untouched());
      REQUIRE(undo.bytes() == 0);
    }
  }
}

TEST_CASE("after a successful restore the Undo puts the old bytes back", "[resume]") {
  Saved s;
  save(&s);
  RestoreOptions o;
  o.chunk_bytes = 65536;
  Destinations d(s.manifest, &o);
  Undo undo;
  o.undo = &undo;
  RestoreStats stats;
  auto got = restore_rank(Env::posix(), s.dir.path(), 0, o, &stats);
  REQUIRE(got.is_ok());
  REQUIRE_FALSE(d.untouched());
  REQUIRE(undo.bytes() == [&] {
    uint64_t n = 0;
    for (const auto& [p, b] : d.bytes) n += b.size();
    return n;
  }());
  undo.apply();
  REQUIRE(d.untouched());
}

TEST_CASE("check first: a failed hash leaves every destination untouched with no snapshot",
          "[resume]") {
  for (bool padding : {false, true}) {
    for (unsigned threads : {1u, 3u}) {
      Saved s;
      save_damaged(&s, padding);
      RestoreOptions o = with_file_hash(s);
      o.io_threads = threads;
      o.chunk_bytes = 65536;
      o.check_first = true;
      bool called = false;
      o.before_in_place = [&](Node*) {
        called = true;
        return Status::ok();
      };
      Destinations d(s.manifest, &o);
      auto got = restore_rank(Env::posix(), s.dir.path(), 0, o);
      INFO(got.status().to_string());
      REQUIRE(got.status().code() == Code::kCorrupt);
      REQUIRE(got.status().message().find(padding
                                              ? "whole-file xxh3 mismatch"
                                              : "xxh3 mismatch at offset") != std::string::npos);
      REQUIRE(d.untouched());
      REQUIRE_FALSE(called);
    }
  }
}

TEST_CASE("check first restores the same tree as one read, and says when it checked", "[resume]") {
  Saved s;
  save(&s);
  RestoreOptions one = with_file_hash(s);  // one hashed read into the same kind of destinations
  Destinations one_d(s.manifest, &one);
  auto ref = restore_rank(Env::posix(), s.dir.path(), 0, one);
  REQUIRE(ref.is_ok());
  for (uint64_t in_place_chunk : {uint64_t{4096}, uint64_t{8} << 20}) {
    RestoreOptions o = with_file_hash(s);
    o.check_first = true;
    o.chunk_bytes = 65536;
    o.unhashed_chunk_bytes = in_place_chunk;
    Destinations d(s.manifest, &o);
    size_t seen_untouched = 0;
    o.before_in_place = [&](Node* tree) {
      // The checked tree: bytes of the tensors without a destination, nothing live written.
      const Tensor* note = store::find_tensor(tree, "/extra/note");
      REQUIRE(note != nullptr);
      REQUIRE(xxh3_64(note->data, note->nbytes) == note->xxh3);
      if (d.untouched()) ++seen_untouched;
      return Status::ok();
    };
    RestoreStats stats;
    auto got = restore_rank(Env::posix(), s.dir.path(), 0, o, &stats);
    INFO(got.status().to_string());
    REQUIRE(got.is_ok());
    REQUIRE(seen_untouched == 1);
    REQUIRE(resume_test::compare_trees(*ref, *got) == "");
    for (const auto& [path, bytes] : d.bytes) REQUIRE(bytes == one_d.bytes.at(path));
    REQUIRE(stats.check_seconds > 0);
    REQUIRE(stats.read_bytes >= s.manifest.file_bytes);  // the check read the whole file
  }
}

// The optimizer's state as a fresh optimizer's restore has it: memory allocated for the restore.
void mark_optimizer_fresh(RestoreOptions* o) {
  for (auto& [path, span] : o->destinations) span.fresh = path.rfind("/optimizer/", 0) == 0;
}

TEST_CASE("check first: fresh destinations are filled by the check read, the live ones after it",
          "[resume]") {
  Saved s;
  save(&s);
  RestoreOptions one = with_file_hash(s);
  Destinations want(s.manifest, &one);
  REQUIRE(restore_rank(Env::posix(), s.dir.path(), 0, one).is_ok());
  RestoreStats all_live;
  {
    RestoreOptions o = with_file_hash(s);
    o.check_first = true;
    Destinations d(s.manifest, &o);
    REQUIRE(restore_rank(Env::posix(), s.dir.path(), 0, o, &all_live).is_ok());
  }
  RestoreOptions o = with_file_hash(s);
  o.check_first = true;
  Destinations d(s.manifest, &o);
  mark_optimizer_fresh(&o);
  uint64_t fresh_bytes = 0;
  size_t checked = 0;
  o.before_in_place = [&](Node*) {
    // Between the reads: every fresh destination holds the checkpoint's bytes, no live one
    // changed.
    for (const auto& [path, b] : d.bytes) {
      const bool fresh = path.rfind("/optimizer/", 0) == 0;
      if (fresh) {
        CHECK(b == want.bytes.at(path));
        fresh_bytes += b.size();
      } else if (!d.untouched(path)) {
        FAIL(path << " written early");
      }
      ++checked;
    }
    return Status::ok();
  };
  RestoreStats stats;
  auto got = restore_rank(Env::posix(), s.dir.path(), 0, o, &stats);
  INFO(got.status().to_string());
  REQUIRE(got.is_ok());
  REQUIRE(checked == d.bytes.size());
  REQUIRE(fresh_bytes > 0);
  for (const auto& [path, b] : d.bytes) REQUIRE(b == want.bytes.at(path));
  // The second read left the fresh tensors out (their bytes, less what coalescing pads with).
  REQUIRE(stats.read_bytes < all_live.read_bytes);
  REQUIRE(all_live.read_bytes - stats.read_bytes >= fresh_bytes / 2);
}

// The checking read through the page cache (mapped_file.h: hashed where the file's cached pages
// lie, no read) against pread: the same tree, the same refusal of a damaged tensor, nothing live
// written before every hash passed; the stats say which way the bytes were hashed.
TEST_CASE("check first: hashing cached bytes in place checks as strictly as reading them",
          "[resume]") {
  for (bool mapped : {false, true}) {
    override_mapped_reads(mapped ? 1 : 0);
    Saved s;
    save(&s);
    RestoreOptions one = with_regions(s);
    Destinations one_d(s.manifest, &one);
    REQUIRE(restore_rank(Env::posix(), s.dir.path(), 0, one).is_ok());
    RestoreOptions o = with_regions(s);
    o.check_first = true;
    o.chunk_bytes = 65536;
    o.io_threads = 3;
    Destinations d(s.manifest, &o);
    RestoreStats stats;
    auto got = restore_rank(Env::posix(), s.dir.path(), 0, o, &stats);
    INFO("mapped " << mapped << ": " << got.status().to_string());
    REQUIRE(got.is_ok());
    for (const auto& [path, bytes] : d.bytes) REQUIRE(bytes == one_d.bytes.at(path));
    CHECK((stats.hashed_in_cache > 0) == mapped);

    Saved bad;
    save_damaged(&bad, /*padding=*/false);
    RestoreOptions b = with_regions(bad);
    b.check_first = true;
    b.chunk_bytes = 65536;
    b.io_threads = 3;
    Destinations bd(bad.manifest, &b);
    std::vector<char> warm(bad.manifest.file_bytes);  // cached, so mapped reads take it
    auto file = Env::posix()->open_random(bad.file);
    REQUIRE(file.is_ok());
    REQUIRE((*file)->read_at(0, warm.data(), warm.size()).is_ok());
    auto refused = restore_rank(Env::posix(), bad.dir.path(), 0, b);
    INFO(refused.status().to_string());
    REQUIRE(refused.status().code() == Code::kCorrupt);
    REQUIRE(refused.status().message().find("xxh3 mismatch at offset") != std::string::npos);
    REQUIRE(bd.untouched());
  }
  override_mapped_reads(-1);
}

TEST_CASE("check first: a damaged file leaves the live destinations untouched, fresh ones or not",
          "[resume]") {
  for (bool padding : {false, true}) {
    Saved s;
    save_damaged(&s, padding);
    RestoreOptions o = with_file_hash(s);
    o.check_first = true;
    o.chunk_bytes = 65536;
    Destinations d(s.manifest, &o);
    mark_optimizer_fresh(&o);
    auto got = restore_rank(Env::posix(), s.dir.path(), 0, o);
    INFO(got.status().to_string());
    REQUIRE(got.status().code() == Code::kCorrupt);
    for (const auto& [path, b] : d.bytes) {
      // fresh: may hold what was read
      if (path.rfind("/optimizer/", 0) != 0 && !d.untouched(path)) FAIL(path << " was written");
    }
  }
}

TEST_CASE("check first: before_in_place can stop the restore before anything live is written",
          "[resume]") {
  Saved s;
  save(&s);
  RestoreOptions o = with_file_hash(s);
  o.check_first = true;
  Destinations d(s.manifest, &o);
  o.before_in_place = [](Node*) { return mismatch("the rng state does not fit"); };
  auto got = restore_rank(Env::posix(), s.dir.path(), 0, o);
  REQUIRE(got.status().code() == Code::kMismatch);
  REQUIRE(got.status().message() == "the rng state does not fit");
  REQUIRE(d.untouched());
}

TEST_CASE("check first: a file written between the check and the copy fails the restore",
          "[resume]") {
  for (bool with_undo : {false, true}) {
    Saved s;
    save(&s);
    RestoreOptions o = with_file_hash(s);
    o.check_first = true;
    Destinations d(s.manifest, &o);
    Undo undo;
    if (with_undo) o.undo = &undo;
    o.before_in_place = [&](Node*) {
      // Another process writes into the file: its mtime moves (set explicitly, so the test does
      // not depend on the timestamp granularity).
      struct timespec times[2] = {{0, UTIME_OMIT}, {1234567890, 0}};
      REQUIRE(::utimensat(AT_FDCWD, s.file.c_str(), times, 0) == 0);
      return Status::ok();
    };
    auto got = restore_rank(Env::posix(), s.dir.path(), 0, o);
    INFO(got.status().to_string());
    REQUIRE(got.status().code() == Code::kIoError);
    REQUIRE(got.status().message().find(s.file + ": changed while it was being restored") == 0);
    if (with_undo) {
      REQUIRE(got.status().message().find("the destinations were put back") != std::string::npos);
      REQUIRE(d.untouched());
    } else {
      REQUIRE(got.status().message().find("partly overwritten") != std::string::npos);
    }
  }
}

TEST_CASE("the region digest checks the whole file without a sequential pass", "[resume]") {
  Saved s;
  save(&s);
  auto ref = store::read_rank(Env::posix(), s.dir.path(), 0);
  REQUIRE(ref.is_ok());
  for (bool check_first : {false, true}) {
    RestoreOptions o = with_regions(s);
    o.check_first = check_first;
    RestoreStats stats;
    auto got = restore_rank(Env::posix(), s.dir.path(), 0, o, &stats);
    INFO(got.status().to_string());
    REQUIRE(got.is_ok());
    REQUIRE(resume_test::compare_trees(*ref, *got).empty());
    REQUIRE(stats.read_bytes >= s.manifest.file_bytes);  // every byte of the file was checked
  }
  // Only the optimizer is wanted: the model's bytes are still read, hashed and left out.
  RestoreOptions some = with_regions(s);
  some.components = {Component::kOptimizer};
  auto part = restore_rank(Env::posix(), s.dir.path(), 0, some);
  REQUIRE(part.is_ok());
  REQUIRE(store::find_tensor(&*part, "/model/big")->data == nullptr);
  REQUIRE(store::find_tensor(&*part, "/optimizer/state/p3/exp_avg")->data != nullptr);
}

TEST_CASE("the region digest refuses a flipped byte anywhere, before any destination is written",
          "[resume]") {
  for (bool padding : {false, true}) {
    Saved s;
    save_damaged(&s, padding);
    RestoreOptions o = with_regions(s);  // one read, no Undo, no check first
    Destinations d(s.manifest, &o);
    auto got = restore_rank(Env::posix(), s.dir.path(), 0, o);
    INFO(got.status().to_string());
    REQUIRE(got.status().code() == Code::kCorrupt);
    if (padding) {
      REQUIRE(got.status().message().find(s.file +
                                          ": whole-file xxh3 mismatch in the bytes outside every "
                                          "tensor (HDF5 metadata, padding)") == 0);
      REQUIRE(d.untouched());  // the bytes between the tensors are checked first
    } else {
      REQUIRE(got.status().message().find("xxh3 mismatch at offset") != std::string::npos);
    }
  }
  // A flip in a tensor of a component that was not asked for is found too.
  Saved s;
  save(&s);
  const ManifestEntry* model = nullptr;
  for (const auto& e : s.manifest.tensors) {
    if (e.path == "/model/bigger") model = &e;
  }
  REQUIRE(model != nullptr);
  resume_test::flip_bit(s.file, model->offset + 17);
  RestoreOptions o = with_regions(s);
  o.components = {Component::kOptimizer};
  auto got = restore_rank(Env::posix(), s.dir.path(), 0, o);
  REQUIRE(got.status().code() == Code::kCorrupt);
  REQUIRE(got.status().message().find("tensor \"/model/bigger\"") == 0);
}

}  // namespace
}  // namespace ckpt::resume::all_or_nothing_test

namespace ckpt::resume::all_or_nothing_test {
namespace {

// Rewrites one hex digit of tensor `path`'s xxh3 attribute where HDF5 stored it: the dataset's
// header now disagrees with the manifest, and no tensor byte changed.
void damage_dataset_header(const Saved& s, const std::string& path) {
  const ManifestEntry* e = nullptr;
  for (const auto& t : s.manifest.tensors) {
    if (t.path == path) e = &t;
  }
  REQUIRE(e != nullptr);
  auto bytes = Env::posix()->read_all(s.file, 1u << 30);
  REQUIRE(bytes.is_ok());
  const size_t at = bytes->find(hex64(e->xxh3));
  REQUIRE(at != std::string::npos);
  const int fd = ::open(s.file.c_str(), O_WRONLY);
  REQUIRE(fd >= 0);
  const char digit = (*bytes)[at] == '0' ? '1' : '0';
  REQUIRE(::pwrite(fd, &digit, 1, static_cast<off_t>(at)) == 1);
  ::close(fd);
}

TEST_CASE("a dataset header that disagrees with the manifest is refused either way", "[resume]") {
  Saved s;
  save(&s);
  damage_dataset_header(s, "/model/big");
  // Read every dataset: the cross-check with the manifest refuses the file.
  auto every = store::open_rank_structure(Env::posix(), s.dir.path(), 0);
  INFO(every.status().to_string());
  REQUIRE(every.status().code() == Code::kCorrupt);
  RestoreOptions no_file_check;  // hashes verified, no commit record: every dataset is opened
  REQUIRE(restore_rank(Env::posix(), s.dir.path(), 0, no_file_check).status().code() ==
          Code::kCorrupt);
  // Take the datasets from the manifest (the restore path): the structure opens, and the region
  // digest, which covers the dataset headers, refuses the file before any destination is written.
  REQUIRE(
      store::open_rank_structure(Env::posix(), s.dir.path(), 0, store::DatasetCheck::kFromManifest)
          .is_ok());
  for (bool check_first : {false, true}) {
    RestoreOptions o = with_regions(s);
    o.check_first = check_first;
    Destinations d(s.manifest, &o);
    auto got = restore_rank(Env::posix(), s.dir.path(), 0, o);
    INFO(got.status().to_string());
    REQUIRE(got.status().code() == Code::kCorrupt);
    REQUIRE(got.status().message().find(s.file + ": whole-file xxh3 mismatch in the bytes outside "
                                                 "every tensor") == 0);
    REQUIRE(d.untouched());
  }
  RestoreOptions whole = with_file_hash(s);  // no region digest: the streamed whole-file hash
  whole.check_first = true;
  Destinations d(s.manifest, &whole);
  REQUIRE(restore_rank(Env::posix(), s.dir.path(), 0, whole).status().code() == Code::kCorrupt);
  REQUIRE(d.untouched());
}

TEST_CASE("datasets from the manifest: the same tree, and a missing link is still refused",
          "[resume]") {
  Saved s;
  save(&s);
  auto every = store::open_rank_structure(Env::posix(), s.dir.path(), 0);
  auto trusted =
      store::open_rank_structure(Env::posix(), s.dir.path(), 0, store::DatasetCheck::kFromManifest);
  REQUIRE(every.is_ok());
  REQUIRE(trusted.is_ok());
  REQUIRE(resume_test::compare_trees(every->root, trusted->root).empty());
  REQUIRE(every->datasets.size() == trusted->datasets.size());
  for (size_t i = 0; i < every->datasets.size(); ++i) {
    const h5::DatasetInfo& a = every->datasets[i];
    const h5::DatasetInfo& b = trusted->datasets[i];
    INFO(a.path);
    REQUIRE(a.path == b.path);
    REQUIRE(a.alias_of == b.alias_of);
    REQUIRE(a.shape == b.shape);
    REQUIRE(a.xxh3 == b.xxh3);
    if (a.nbytes > 0) REQUIRE(a.offset == b.offset);
  }
  // The manifest names a tensor the file does not have.
  auto m = store::read_manifest(Env::posix(), s.dir.path(), 0);
  REQUIRE(m.is_ok());
  ManifestEntry extra;  // empty, so that it overlaps nothing
  extra.path = "/model/not_in_the_file";
  extra.shape = {0};
  extra.xxh3 = xxh3_64(nullptr, 0);
  m->tensors.push_back(extra);
  REQUIRE(Env::posix()
              ->write_atomic(path_join(s.dir.path(), rank_manifest_name(0)), encode_manifest(*m))
              .is_ok());
  auto missing =
      store::open_rank_structure(Env::posix(), s.dir.path(), 0, store::DatasetCheck::kFromManifest);
  INFO(missing.status().to_string());
  REQUIRE(missing.status().code() == Code::kCorrupt);
  REQUIRE(missing.status().message().find("the manifest lists") != std::string::npos);
}

}  // namespace
}  // namespace ckpt::resume::all_or_nothing_test
