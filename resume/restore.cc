#include "resume/restore.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <new>
#include <optional>
#include <vector>

#include "ckpt/base/hash.h"
#include "ckpt/base/stream_copy.h"
#include "ckpt/h5/rank_file.h"
#include "ckpt/io/host_memory.h"
#include "ckpt/store/rank_io.h"
#include "ckpt/store/regions_check.h"
#include "resume/pipeline.h"
#include "resume/read_cache.h"
#include "resume/read_plan.h"

namespace ckpt::resume {
namespace {

using Clock = std::chrono::steady_clock;

double since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// Memory the kernel copies file bytes into is page-aligned (staging) or 64-byte aligned (tensors
// the tree owns, as torch's allocator aligns its own): the file's tensors start on 4 KiB
// boundaries, and a copy whose destination sits 16 bytes off the source's alignment — all that
// operator new promises — ran 2-3x slower on the development machine (AMD EPYC, `rep movsb`).
struct FreeAligned {
  void operator()(unsigned char* p) const { std::free(p); }
};
using AlignedBytes = std::unique_ptr<unsigned char[], FreeAligned>;

AlignedBytes aligned_bytes(size_t alignment, uint64_t nbytes) {
  const size_t n =
      static_cast<size_t>((std::max<uint64_t>(nbytes, 1) + alignment - 1) / alignment * alignment);
  auto* p = static_cast<unsigned char*>(std::aligned_alloc(alignment, n));
  if (p == nullptr) throw std::bad_alloc();
  return AlignedBytes(p);
}

// One staging buffer per worker, grown to the largest coalesced chunk that worker meets; shared by
// the reads of one restore (check_first's two), so its pages are faulted in once. Each worker
// touches only its own.
class Staging {
 public:
  explicit Staging(unsigned workers) : buffers_(workers) {}
  Result<unsigned char*> get(unsigned worker, uint64_t nbytes) {
    if (worker >= buffers_.size()) return internal_error("restore: worker index out of range");
    Buffer& b = buffers_[worker];
    if (b.size < nbytes) {
      b.bytes = aligned_bytes(4096, nbytes);
      b.size = nbytes;
    }
    return b.bytes.get();
  }

 private:
  struct Buffer {
    AlignedBytes bytes;
    uint64_t size = 0;
  };
  std::vector<Buffer> buffers_;
};

// Reads chunks straight into the destination when a chunk is one whole piece of one tensor, and
// a chunk of coalesced small tensors that all have destinations with one scattered read into
// them (scatter(): one syscall instead of many, no staging copy; the pipeline hashes each piece
// there while it is in cache). Otherwise — the check read of check_first, the streamed
// whole-file hash — into the worker's staging buffer, then each piece is copied out. A tensor
// whose destination is null is read into staging and only hashed (check_first's first read).
// With an Undo, `saved[t]` is where tensor t's old bytes go (null: memory the tree owns), and each
// piece's old bytes are copied there just before the piece is overwritten.
class HostSink final : public ChunkSink {
 public:
  HostSink(const ReadPlan& plan, const std::vector<unsigned char*>& dst,
           const std::vector<unsigned char*>& saved, Staging* staging)
      : plan_(plan),
        dst_(dst),
        saved_(saved),
        taken_(saved.empty() ? 0 : plan.pieces.size(), 0),
        staging_(staging) {}

  Result<unsigned char*> acquire(unsigned worker, const PlanChunk& c) override {
    if (direct(c)) {
      save_old(c.first_piece);
      const PlanPiece& p = plan_.pieces[c.first_piece];
      return dst_[p.tensor] + p.tensor_offset;
    }
    return staging_->get(worker, c.nbytes);
  }

  Status deliver(unsigned, const PlanChunk& c, unsigned char* bytes) override {
    if (direct(c)) return Status::ok();
    for (uint32_t k = 0; k < c.piece_count; ++k) {
      const PlanPiece& p = plan_.pieces[c.first_piece + k];
      if (dst_[p.tensor] == nullptr) continue;  // hashed only
      save_old(c.first_piece + k);  // streamed: the pipeline hashes `bytes`, not the copy
      stream_copy(dst_[p.tensor] + p.tensor_offset, bytes + p.chunk_offset, p.nbytes);
    }
    return Status::ok();
  }

  Status release(unsigned, const PlanChunk&, unsigned char*) override { return Status::ok(); }
  bool bytes_stay(const PlanChunk& c) const override { return direct(c); }
  bool hash_only(const PlanChunk& c) const override {
    for (uint32_t k = 0; k < c.piece_count; ++k) {
      if (dst_[plan_.pieces[c.first_piece + k].tensor] != nullptr) return false;
    }
    return true;
  }

  // Coalesced small tensors that all have a destination: one preadv straight into them, the
  // padding between them into the worker's staging buffer (its bytes are never looked at).
  bool scatter(unsigned worker, const PlanChunk& c, std::vector<ReadSpan>* spans,
               std::vector<const unsigned char*>* piece_bytes) override {
    uint64_t widest_gap = 0, at = 0;
    for (uint32_t k = 0; k < c.piece_count; ++k) {
      const PlanPiece& p = plan_.pieces[c.first_piece + k];
      if (dst_[p.tensor] == nullptr) return false;  // hashed only: staged
      widest_gap = std::max(widest_gap, p.chunk_offset - at);
      at = p.chunk_offset + p.nbytes;
    }
    unsigned char* pad = nullptr;
    if (widest_gap > 0) {
      auto got = staging_->get(worker, widest_gap);
      if (!got.is_ok()) return false;
      pad = *got;
    }
    at = 0;
    for (uint32_t k = 0; k < c.piece_count; ++k) {
      const PlanPiece& p = plan_.pieces[c.first_piece + k];
      if (p.chunk_offset > at) spans->push_back({pad, static_cast<size_t>(p.chunk_offset - at)});
      save_old(c.first_piece + k);
      unsigned char* d = dst_[p.tensor] + p.tensor_offset;
      spans->push_back({d, static_cast<size_t>(p.nbytes)});
      piece_bytes->push_back(d);
      at = p.chunk_offset + p.nbytes;
    }
    return true;
  }

  // After the run: the ranges whose old bytes were saved.
  std::vector<Undo::Range> taken_ranges() const {
    std::vector<Undo::Range> out;
    for (size_t i = 0; i < taken_.size(); ++i) {
      if (!taken_[i]) continue;
      const PlanPiece& p = plan_.pieces[i];
      out.push_back({dst_[p.tensor] + p.tensor_offset, saved_[p.tensor] + p.tensor_offset,
                     static_cast<size_t>(p.nbytes)});
    }
    return out;
  }

 private:
  bool direct(const PlanChunk& c) const {
    return plan_.is_direct(c) && dst_[plan_.pieces[c.first_piece].tensor] != nullptr;
  }
  // Each piece belongs to one chunk, read by one worker: distinct workers write distinct flags.
  void save_old(uint32_t piece) {
    if (taken_.empty()) return;
    const PlanPiece& p = plan_.pieces[piece];
    if (saved_[p.tensor] == nullptr) return;
    stream_copy(saved_[p.tensor] + p.tensor_offset, dst_[p.tensor] + p.tensor_offset, p.nbytes);
    taken_[piece] = 1;
  }

  const ReadPlan& plan_;
  const std::vector<unsigned char*>& dst_;
  const std::vector<unsigned char*>& saved_;
  std::vector<char> taken_;
  Staging* staging_;
};

// Memory for the undo snapshot: as large as the destinations and first-touch, so faulted in by
// one call before the workers write it (host_memory.h).
Result<HostMemory> snapshot_buffer(uint64_t bytes, const std::string& fpath) {
  auto m = HostMemory::allocate(bytes, /*populate=*/true, "the restore's undo snapshot");
  if (!m.is_ok()) return m.status().with_context(fpath);
  return m;
}

// Whether the tensors of top-level group `group` are read (RestoreOptions::components, groups).
bool requested(const RestoreOptions& options, const std::string& group) {
  if (options.components.empty() && options.groups.empty()) return true;
  if (options.groups.count(group) != 0) return true;
  const std::optional<Component> c = component_from_name(group);
  return c.has_value() && options.components.count(*c) != 0;
}

Status check_destinations(const Manifest& m, const RestoreOptions& options,
                          const std::string& fpath) {
  std::map<std::string, const ManifestEntry*> by_path;
  for (const auto& e : m.tensors) by_path[e.path] = &e;
  for (const auto& [path, span] : options.destinations) {
    auto it = by_path.find(path);
    if (it == by_path.end()) {
      return not_found("destination for tensor \"" + path + "\": " + fpath +
                       " has no such tensor (aliases have no bytes of their own)");
    }
    if (!requested(options, store::top_component(path))) {
      return invalid_argument("destination for tensor \"" + path +
                              "\" is outside the requested components");
    }
    const uint64_t want = it->second->nbytes;
    if (span.nbytes != want) {
      return mismatch("tensor \"" + path + "\" in " + fpath + ": destination holds " +
                      std::to_string(span.nbytes) + " bytes, expected " + std::to_string(want));
    }
    if (span.data == nullptr && want > 0) {
      return invalid_argument("destination for tensor \"" + path + "\" is a null pointer");
    }
  }
  return Status::ok();
}

// One read into place, each tensor hashed on the fly; with an Undo, every destination range's
// old bytes are saved just before it is overwritten and put back if the read fails. `dst[t]` is
// where tensor t goes; `caller[t]` says it is caller memory (the Undo's business).
Status read_into_place(const RandomAccessFile& file, const ReadPlan& plan,
                       const std::vector<unsigned char*>& dst, const std::vector<char>& caller,
                       const PipelineOptions& pipe, Undo* undo, Staging* staging,
                       PipelineStats* ps) {
  std::vector<unsigned char*> saved;  // old bytes, tensor after tensor in one buffer
  HostMemory saved_bytes;
  if (undo != nullptr) {
    undo->clear();
    uint64_t total = 0;
    for (size_t i = 0; i < plan.tensors.size(); ++i) {
      if (caller[i]) total += plan.tensors[i].nbytes;
    }
    CKPT_ASSIGN_OR_RETURN(saved_bytes, snapshot_buffer(total, file.path()));
    saved.assign(plan.tensors.size(), nullptr);
    uint64_t at = 0;
    for (size_t i = 0; i < plan.tensors.size(); ++i) {
      if (!caller[i]) continue;
      saved[i] = saved_bytes.data() + at;
      at += plan.tensors[i].nbytes;
    }
  }
  HostSink sink(plan, dst, saved, staging);
  Status ran = run_pipeline(file, plan, &sink, pipe, ps);
  if (undo != nullptr) {
    undo->hold(std::make_shared<HostMemory>(std::move(saved_bytes)), sink.taken_ranges());
    if (!ran.is_ok()) undo->apply();
  }
  return ran;
}

// The region digest's half that the pipeline does not check: the bytes between the tensors
// (HDF5 metadata, padding); the tensors' regions carry the manifest's hashes, which the pipeline
// then holds every tensor's bytes to.
Status check_gaps(const RandomAccessFile& file, const Manifest& m, uint64_t file_bytes,
                  uint64_t want) {
  CKPT_ASSIGN_OR_RETURN(const uint64_t got, store::regions_digest_of(file, m, file_bytes));
  if (got == want) return Status::ok();
  return corrupt(file.path() +
                 ": whole-file xxh3 mismatch in the bytes outside every tensor (HDF5 metadata, "
                 "padding): their region digest is " +
                 hex64(got) + ", the commit record's " + hex64(want));
}

void add_stats(const PipelineStats& ps, RestoreStats* local) {
  local->read_bytes += ps.read_bytes;
  local->chunks += ps.chunks;
  local->scattered += ps.scattered;
  local->hashed_in_cache += ps.hashed_in_cache;
  local->threads = std::max(local->threads, ps.threads);
}

// check_first: the first read checks every hash and fills only memory the tree owns and fresh
// destinations; then before_in_place; then the other destinations, in a second read with large
// chunks and no hashing.
Status read_checked_first(const RandomAccessFile& file, ReadCache* cache, const Manifest& m,
                          const ReadPlan& plan, const std::vector<unsigned char*>& dst,
                          const std::vector<char>& caller, const PipelineOptions& pipe,
                          const RestoreOptions& options, const std::function<Status()>& link,
                          Node* root, Staging* staging, RestoreStats* local) {
  const std::string before = file.version();
  const auto t0 = Clock::now();
  std::vector<unsigned char*> owned_only = dst;
  std::vector<size_t> in_place;  // manifest indices
  std::map<std::string, unsigned char*> by_path;
  for (size_t i = 0; i < plan.tensors.size(); ++i) {
    if (!caller[i]) continue;
    owned_only[i] = nullptr;
    in_place.push_back(plan.tensors[i].manifest_index);
    by_path[plan.tensors[i].path] = dst[i];
  }
  // The second read's plan comes first: a ReadCache keeps only what it will read.
  PlanOptions popts;
  popts.chunk_bytes = options.unhashed_chunk_bytes;
  popts.coalesce_bytes = options.chunk_bytes;  // larger tensors read straight into place
  popts.max_gap = options.max_gap;
  ReadPlan copy;
  if (!in_place.empty()) {
    CKPT_ASSIGN_OR_RETURN(copy, make_read_plan(m, in_place, popts));
  }
  if (cache != nullptr) cache->keep_only(chunk_ranges(copy));
  PipelineStats ps;
  {
    HostSink check(plan, owned_only, {}, staging);
    CKPT_RETURN_IF_ERROR(run_pipeline(file, plan, &check, pipe, &ps));
  }
  add_stats(ps, local);
  local->check_seconds = since(t0);
  CKPT_RETURN_IF_ERROR(link());
  if (options.before_in_place) CKPT_RETURN_IF_ERROR(options.before_in_place(root));
  if (in_place.empty()) return Status::ok();

  std::vector<unsigned char*> dst2(copy.tensors.size());
  for (size_t i = 0; i < copy.tensors.size(); ++i) dst2[i] = by_path.at(copy.tensors[i].path);
  PipelineOptions unhashed = pipe;
  unhashed.verify_hashes = false;
  unhashed.check_file_hash = false;
  PipelineStats ps2;
  CKPT_RETURN_IF_ERROR(read_into_place(file, copy, dst2, std::vector<char>(dst2.size(), 1),
                                       unhashed, options.undo, staging, &ps2));
  add_stats(ps2, local);
  if (!before.empty() && file.version() != before) {
    const bool undone = options.undo != nullptr;
    if (undone) options.undo->apply();
    return io_error(file.path() +
                    ": changed while it was being restored (written to between the check and the "
                    "copy): " +
                    (undone ? "the destinations were put back"
                            : "the destinations are partly "
                              "overwritten") +
                    "; restore again");
  }
  return Status::ok();
}

Result<Node> restore_impl(Env* env, store::RankStructure rs, const RestoreOptions& options,
                          RestoreStats* stats, Clock::time_point t0) {
  const Manifest& m = rs.manifest;
  const std::string& fpath = rs.file;
  Node& root = rs.root;
  CKPT_RETURN_IF_ERROR(check_destinations(m, options, fpath));

  const bool check_file = options.check_file_hash && options.verify_hashes;
  const bool by_regions = check_file && options.file_regions_xxh3.has_value();
  std::vector<char> wanted(m.tensors.size(), 0);  // of the requested components
  std::vector<size_t> planned;
  for (size_t i = 0; i < m.tensors.size(); ++i) {
    wanted[i] = requested(options, store::top_component(m.tensors[i].path));
    if (wanted[i] || by_regions) planned.push_back(i);
  }
  std::shared_ptr<RandomAccessFile> opened = rs.opened;  // on a store, open_rank_structure's
  if (opened == nullptr) {
    CKPT_ASSIGN_OR_RETURN(opened, env->open_random(fpath));
  }
  // A remote store wants large reads, many in flight (ReadProfile), and a check-first restore
  // reads from it once: the second read copies the checked bytes from a ReadCache.
  const ReadProfile profile = opened->read_profile();
  std::unique_ptr<ReadCache> cache;
  if (profile.remote && options.check_first && options.verify_hashes) {
    cache = std::make_unique<ReadCache>(*opened, default_cache_budget(opened->size()));
  }
  const RandomAccessFile* file = cache ? cache.get() : opened.get();
  const uint64_t chunk_bytes = std::max(options.chunk_bytes, profile.read_bytes);
  PlanOptions popts;
  popts.chunk_bytes = options.verify_hashes ? chunk_bytes : options.unhashed_chunk_bytes;
  popts.coalesce_bytes = chunk_bytes;
  popts.max_gap = options.max_gap;
  CKPT_ASSIGN_OR_RETURN(ReadPlan plan, make_read_plan(m, planned, popts));
  if (check_file) {
    if (options.file_bytes != m.file_bytes) {
      return corrupt(fpath + ": " + std::to_string(m.file_bytes) +
                     " bytes, the commit record lists " + std::to_string(options.file_bytes));
    }
    if (!by_regions) CKPT_RETURN_IF_ERROR(cover_file(&plan, options.file_bytes, fpath));
  }

  // Destinations: the caller's span, or memory the tree will own.
  RestoreStats local;
  std::vector<unsigned char*> dst(plan.tensors.size(), nullptr);
  std::vector<char> caller(plan.tensors.size(), 0);
  for (size_t i = 0; i < plan.tensors.size(); ++i) {
    const PlanTensor& pt = plan.tensors[i];
    if (!wanted[pt.manifest_index]) continue;  // hashed for the file's check only
    Tensor* t = store::find_tensor(&root, pt.path);
    if (t == nullptr) return internal_error(fpath + ": \"" + pt.path + "\" vanished from the tree");
    auto d = options.destinations.find(pt.path);
    if (d != options.destinations.end()) {
      dst[i] = static_cast<unsigned char*>(d->second.data);
      caller[i] = d->second.fresh ? 0 : 1;  // fresh memory needs neither the check nor an undo
      t->data = dst[i];
      ++local.placed;
    } else {
      AlignedBytes bytes = aligned_bytes(64, pt.nbytes);
      std::shared_ptr<unsigned char> owned(bytes.release(), FreeAligned());
      dst[i] = owned.get();
      t->data = owned.get();
      t->keepalive = std::shared_ptr<const void>(owned, owned.get());
    }
    t->nbytes = pt.nbytes;
  }
  local.metadata_seconds = since(t0);

  const auto t1 = Clock::now();
  PipelineOptions pipe;
  pipe.io_threads = io_threads_for(*file, options.io_threads);
  pipe.verify_hashes = options.verify_hashes;
  pipe.check_file_hash = check_file && !by_regions;
  pipe.file_xxh3 = options.file_xxh3;
  if (by_regions) {
    CKPT_RETURN_IF_ERROR(check_gaps(*file, m, options.file_bytes, *options.file_regions_xxh3));
    uint64_t in_tensors = 0;
    for (const auto& e : m.tensors) in_tensors += e.nbytes;
    local.read_bytes += options.file_bytes - in_tensors;
  }
  bool linked = false;
  auto link = [&]() -> Status {
    linked = true;
    return store::link_aliases(rs.datasets, &root, fpath);
  };
  Staging staging(pipe.io_threads);
  if (options.check_first && options.verify_hashes) {
    CKPT_RETURN_IF_ERROR(read_checked_first(*file, cache.get(), m, plan, dst, caller, pipe, options,
                                            link, &root, &staging, &local));
  } else {
    PipelineStats ps;
    CKPT_RETURN_IF_ERROR(
        read_into_place(*file, plan, dst, caller, pipe, options.undo, &staging, &ps));
    add_stats(ps, &local);
  }
  local.data_seconds = since(t1);
  if (cache) local.cached_bytes = cache->held_bytes();
  if (!linked) CKPT_RETURN_IF_ERROR(link());
  for (const PlanTensor& pt : plan.tensors) {
    if (!wanted[pt.manifest_index]) continue;
    local.tensor_bytes += pt.nbytes;
    ++local.tensors;
  }
  if (stats != nullptr) *stats = local;
  return std::move(rs.root);
}

}  // namespace

void check_whole_file(const CommitFile& listed, RestoreOptions* options) {
  options->check_file_hash = true;
  options->file_bytes = listed.bytes;
  options->file_xxh3 = listed.xxh3;
  options->file_regions_xxh3 = listed.regions_xxh3;
}

void Undo::hold(std::shared_ptr<void> saved, std::vector<Range> ranges) {
  saved_ = std::move(saved);
  ranges_ = std::move(ranges);
}

void Undo::apply() {
  for (const Range& r : ranges_) std::memcpy(r.dst, r.saved, r.nbytes);
  clear();
}

void Undo::clear() {
  ranges_.clear();
  saved_.reset();
}

uint64_t Undo::bytes() const {
  uint64_t n = 0;
  for (const Range& r : ranges_) n += r.nbytes;
  return n;
}

Result<Node> restore_rank(Env* env, const std::string& step_dir, int64_t rank,
                          const RestoreOptions& options, RestoreStats* stats) {
  const auto t0 = Clock::now();
  // The datasets come from the manifest when every byte of the file is then checked against the
  // commit record (dataset headers included), or when nothing is verified at all.
  const auto check = options.check_file_hash || !options.verify_hashes
                         ? store::DatasetCheck::kFromManifest
                         : store::DatasetCheck::kOpenEvery;
  CKPT_ASSIGN_OR_RETURN(store::RankStructure rs,
                        store::open_rank_structure(env, step_dir, rank, check));
  try {
    return restore_impl(env, std::move(rs), options, stats, t0);
  } catch (const std::exception& e) {  // allocation failure for a large tensor
    return internal_error(path_join(step_dir, rank_file_name(rank)) + ": restore: " + e.what());
  }
}

Result<Node> restore_rank(Env* env, store::RankStructure structure, const RestoreOptions& options,
                          RestoreStats* stats) {
  const std::string fpath = structure.file;
  try {
    return restore_impl(env, std::move(structure), options, stats, Clock::now());
  } catch (const std::exception& e) {
    return internal_error(fpath + ": restore: " + e.what());
  }
}

}  // namespace ckpt::resume
