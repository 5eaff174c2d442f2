#include "resume/reshard_read.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <optional>

#include "ckpt/base/hash.h"
#include "ckpt/base/stream_copy.h"
#include "ckpt/store/box_tiling.h"
#include "ckpt/store/commit_index.h"
#include "ckpt/store/run_dir.h"
#include "resume/index_read.h"
#include "resume/pipeline.h"
#include "resume/read_plan.h"

namespace ckpt::resume {
namespace {

// Where one read's bytes go: straight into one target (`direct`, the read lies within one run),
// or read into the worker's staging buffer with the part each run it overlaps holds copied into
// that run's target (`spans`: a chunk that straddles runs, or reaches past its rank's rows);
// neither: hashed and dropped.
struct Span {
  uint64_t at = 0;  // offset in the read
  unsigned char* dst = nullptr;
  uint64_t nbytes = 0;
};
struct Dest {
  unsigned char* direct = nullptr;
  std::vector<Span> spans;  // `at` order
};

// Reads a plan of boxes and chunks into their Dests (per plan tensor). A chunk that is one whole
// read with a direct destination is read straight into it; every other chunk (coalesced small
// reads, straddling chunks, dropped reads) goes through the worker's staging buffer.
class BoxSink final : public ChunkSink {
 public:
  BoxSink(const ReadPlan& plan, std::vector<Dest> dst, unsigned workers)
      : plan_(plan), dst_(std::move(dst)), staging_(workers) {}

  Result<unsigned char*> acquire(unsigned worker, const PlanChunk& c) override {
    if (bytes_stay(c)) {
      const PlanPiece& p = plan_.pieces[c.first_piece];
      return dst_[p.tensor].direct + p.tensor_offset;
    }
    if (worker >= staging_.size()) return internal_error("shard read: worker out of range");
    staging_[worker].resize(c.nbytes);
    return staging_[worker].data();
  }
  Status deliver(unsigned, const PlanChunk& c, unsigned char* bytes) override {
    if (bytes_stay(c)) return Status::ok();
    uint64_t copied = 0;
    for (uint32_t k = 0; k < c.piece_count; ++k) {
      const PlanPiece& p = plan_.pieces[c.first_piece + k];
      const Dest& d = dst_[p.tensor];
      const unsigned char* src = bytes + p.chunk_offset;
      if (d.direct != nullptr) {  // streamed: the pipeline hashes the staging copy, not this
        stream_copy(d.direct + p.tensor_offset, src, p.nbytes);
        copied += p.nbytes;
      }
      const uint64_t a = p.tensor_offset, b = a + p.nbytes;  // the piece, in the read
      auto it = std::partition_point(d.spans.begin(), d.spans.end(),
                                     [&](const Span& sp) { return sp.at + sp.nbytes <= a; });
      for (; it != d.spans.end() && it->at < b; ++it) {
        const uint64_t from = std::max(a, it->at), to = std::min(b, it->at + it->nbytes);
        stream_copy(it->dst + (from - it->at), src + (from - a), to - from);
        copied += to - from;
      }
    }
    copied_ += copied;
    return Status::ok();
  }
  Status release(unsigned, const PlanChunk& c, unsigned char*) override {
    if (bytes_stay(c)) in_place_ += c.nbytes;
    return Status::ok();
  }
  bool bytes_stay(const PlanChunk& c) const override {
    return plan_.is_direct(c) && dst_[plan_.pieces[c.first_piece].tensor].direct != nullptr;
  }
  bool hash_only(const PlanChunk& c) const override {
    for (uint32_t k = 0; k < c.piece_count; ++k) {
      const Dest& d = dst_[plan_.pieces[c.first_piece + k].tensor];
      if (d.direct != nullptr || !d.spans.empty()) return false;
    }
    return true;
  }
  uint64_t copied() const { return copied_; }      // bytes copied from staging into targets
  uint64_t in_place() const { return in_place_; }  // bytes read straight into targets

 private:
  const ReadPlan& plan_;
  std::vector<Dest> dst_;
  std::vector<std::vector<unsigned char>> staging_;
  std::atomic<uint64_t> copied_{0};
  std::atomic<uint64_t> in_place_{0};
};

// The coalesced plan of `reads` (one tensor per read, in their order) of a file whose storage
// reads as `profile`. Hashed (prepare's reads), as the one-file restore plans them: reads of at
// most options.chunk_bytes, or of what a remote store asks for, each hashed while it is still in
// cache. Unhashed (copy_out's): up to options.unhashed_chunk_bytes, boxes over chunk_bytes read
// alone, straight into their targets.
Result<ReadPlan> plan_reads(const std::vector<CheckedRead>& reads, const ShardReadOptions& options,
                            const ReadProfile& profile, bool hashed) {
  std::vector<ManifestEntry> entries;
  entries.reserve(reads.size());
  for (const CheckedRead& r : reads) entries.push_back(r.entry);
  const uint64_t chunk_bytes = std::max(options.chunk_bytes, profile.read_bytes);
  PlanOptions popts;
  popts.chunk_bytes = hashed ? chunk_bytes : std::max(options.unhashed_chunk_bytes, chunk_bytes);
  popts.coalesce_bytes = chunk_bytes;
  popts.max_gap = 64u << 10;
  return make_read_plan(entries, popts);
}

// Runs `reads` of `file` through the pipeline into `dst` (per read; empty: every read hashed and
// dropped), hashed or not; adds to stats' bytes_copied (from staging into targets) and
// bytes_in_place (read straight into them).
Status read_entries(const RandomAccessFile& file, const std::vector<CheckedRead>& reads,
                    const std::vector<Dest>& dst, bool verify, const ShardReadOptions& options,
                    PipelineStats* ps, ShardReadStats* stats) {
  CKPT_ASSIGN_OR_RETURN(ReadPlan rp, plan_reads(reads, options, file.read_profile(), verify));
  std::vector<Dest> by_plan(rp.tensors.size());
  if (!dst.empty()) {
    for (size_t t = 0; t < rp.tensors.size(); ++t) by_plan[t] = dst[rp.tensors[t].manifest_index];
  }
  const unsigned threads = io_threads_for(file, options.io_threads);
  BoxSink sink(rp, std::move(by_plan), threads);
  Status s = run_pipeline(file, rp, &sink, PipelineOptions{threads, verify, false, 0}, ps);
  stats->bytes_copied += sink.copied();
  stats->bytes_in_place += sink.in_place();
  return s;
}

// "tensor \"/m/w\": the checkpoint has float32, the live shard bfloat16"
Status check_target(const store::GlobalIndex& index, const ShardTarget& t, uint64_t want_bytes) {
  const int64_t i = index.find_tensor(t.tensor);
  if (i < 0) return Status::ok();  // plan_reshard names it
  const DType saved = index.tensor(static_cast<size_t>(i)).dtype;
  if (saved != t.dtype) {
    return mismatch("tensor \"" + t.tensor + "\": the checkpoint has " + dtype_name(saved) +
                    ", the live shard " + dtype_name(t.dtype));
  }
  if (t.nbytes != want_bytes || (want_bytes > 0 && t.data == nullptr)) {
    return invalid_argument(
        "tensor \"" + t.tensor + "\": the live shard " + store::extent_string(t.extent) +
        " needs " + std::to_string(want_bytes) + " bytes, it has " + std::to_string(t.nbytes));
  }
  return Status::ok();
}

// The manifest of rank file `name` (rank-00003.h5 → rank-00003.manifest.json), checked against
// the commit record.
Result<Manifest> read_listed_manifest(Env* env, const std::string& step_dir,
                                      const CommitRecord& record, const std::string& name) {
  const std::string suffix = ".h5";
  if (name.size() <= suffix.size() ||
      name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0) {
    return not_found(name + ": not a rank file name");
  }
  const std::string mname = name.substr(0, name.size() - suffix.size()) + ".manifest.json";
  CKPT_ASSIGN_OR_RETURN(std::string text, read_listed(env, step_dir, record, mname,
                                                      mname + ": not in the commit record"));
  return decode_manifest(text, path_join(step_dir, mname));
}

// Which targets destinations() fills.
enum class Targets { kAll, kFresh, kLive };

bool fills(Targets which, const ShardTarget& t) {
  return which == Targets::kAll || (which == Targets::kFresh) == t.fresh;
}

// Where each read of `f` goes in the `which` targets (Dest above): into the one run it lies
// within, else the parts the runs it overlaps hold (runs are in file-offset order and never
// overlap).
std::vector<Dest> destinations(const ReshardFile& f, const std::vector<CheckedRead>& reads,
                               const std::vector<ShardTarget>& targets, Targets which) {
  std::vector<Dest> out(reads.size());
  for (size_t i = 0; i < reads.size(); ++i) {
    const uint64_t a = reads[i].entry.offset, b = a + reads[i].entry.nbytes;
    auto it = std::partition_point(f.runs.begin(), f.runs.end(), [&](const ReshardRun& r) {
      return r.file_offset + r.nbytes <= a;
    });
    for (; it != f.runs.end() && it->file_offset < b; ++it) {
      if (!fills(which, targets[it->target])) continue;
      const uint64_t from = std::max(a, it->file_offset);
      const uint64_t to = std::min(b, it->file_offset + it->nbytes);
      auto* dst = static_cast<unsigned char*>(targets[it->target].data) + it->dst_offset +
                  (from - it->file_offset);
      out[i].spans.push_back({from - a, dst, to - from});
    }
    if (out[i].spans.size() == 1 && out[i].spans[0].nbytes == b - a) {
      out[i].direct = out[i].spans[0].dst;  // the read lies within one run
      out[i].spans.clear();
    }
  }
  return out;
}

// Bytes of `dst` that go straight into a target (direct).
uint64_t direct_bytes(const std::vector<CheckedRead>& reads, const std::vector<Dest>& dst) {
  uint64_t n = 0;
  for (size_t i = 0; i < reads.size(); ++i) {
    if (dst[i].direct != nullptr) n += reads[i].entry.nbytes;
  }
  return n;
}

// Bytes `dst` puts into targets, straight or from staging.
uint64_t filled_bytes(const std::vector<CheckedRead>& reads, const std::vector<Dest>& dst) {
  uint64_t n = direct_bytes(reads, dst);
  for (const Dest& d : dst) {
    for (const Span& sp : d.spans) n += sp.nbytes;
  }
  return n;
}

// Check first: the reads of `checked` that live targets overlap (copy_out reads them again).
std::vector<CheckedRead> live_reads(const ReshardFile& f, const std::vector<ShardTarget>& targets,
                                    const std::vector<CheckedRead>& checked) {
  const std::vector<Dest> live = destinations(f, checked, targets, Targets::kLive);
  std::vector<CheckedRead> out;
  for (size_t i = 0; i < checked.size(); ++i) {
    if (live[i].direct != nullptr || !live[i].spans.empty()) out.push_back(checked[i]);
  }
  return out;
}

}  // namespace

Result<store::GlobalIndex> read_step_index(Env* env, const std::string& step_dir,
                                           CommitRecord* record) {
  CKPT_ASSIGN_OR_RETURN(CommitRecord rec, store::read_commit(env, step_dir));
  if (record != nullptr) *record = rec;
  IndexReadOptions whole;
  whole.whole_below = UINT64_MAX;
  return read_index_for(env, step_dir, rec, {}, whole);
}

Result<ShardRead> ShardRead::prepare(Env* env, const std::string& step_dir,
                                     std::vector<ShardTarget> targets,
                                     const ShardReadOptions& options, const CommitRecord* known) {
  ShardRead sr;
  sr.options_ = options;
  // Empty local shards (3 rows over 4 ranks) read nothing; the plan numbers the others.
  std::vector<TargetBox> boxes;
  for (ShardTarget& t : targets) {
    if (t.extent.empty()) {
      if (t.nbytes != 0)
        return invalid_argument("tensor \"" + t.tensor + "\": an empty shard of " +
                                std::to_string(t.nbytes) + " bytes");
      continue;
    }
    boxes.push_back({t.tensor, t.extent});
    sr.targets_.push_back(std::move(t));
  }
  CommitRecord record;
  if (known != nullptr) {
    record = *known;
  } else {
    CKPT_ASSIGN_OR_RETURN(record, store::read_commit(env, step_dir));
  }
  IndexReadStats index_stats;
  CKPT_ASSIGN_OR_RETURN(sr.index_,
                        read_index_for(env, step_dir, record, boxes, options.index, &index_stats));
  sr.stats_.index_bytes_read = index_stats.bytes;
  sr.stats_.index_reads = index_stats.reads;
  const std::string index_path = path_join(step_dir, store::kIndexFileName);
  CKPT_RETURN_IF_ERROR(store::tiling_status(store::check_index_tiling(sr.index_), index_path));
  CKPT_ASSIGN_OR_RETURN(sr.plan_, plan_reshard(sr.index_, boxes));
  for (size_t i = 0; i < sr.targets_.size(); ++i) {
    CKPT_RETURN_IF_ERROR(check_target(sr.index_, sr.targets_[i], sr.plan_.target_bytes[i]));
  }
  bool any_fresh = false;
  for (const ShardTarget& t : sr.targets_) any_fresh = any_fresh || t.fresh;
  bool wrote_live = false;           // some read went into a target (in_place)
  std::vector<std::string> lost;     // rank files that could not be read whole and checked
  std::vector<std::string> reasons;  // why, one each
  for (size_t fi = 0; fi < sr.plan_.files.size(); ++fi) {
    const ReshardFile& f = sr.plan_.files[fi];
    // The file's manifest, for its boxes' chunk digests, when a box is read only in part (a
    // damaged or missing manifest costs only that: the boxes are read whole).
    std::optional<Manifest> manifest;
    if (reads_part_of_a_box(sr.index_, f, kBoxChunkBytes)) {
      auto m = read_listed_manifest(env, step_dir, record, f.name);
      if (m.is_ok()) manifest = std::move(*m);
    }
    Status s = Status::ok();
    PipelineStats ps;
    std::vector<CheckedRead> checked;
    std::vector<Dest> dst;  // per checked read; empty: hashed and dropped
    Reread again;
    auto planned = checked_reads(sr.index_, f, manifest ? &*manifest : nullptr);
    if (planned.is_ok()) {
      checked = std::move(*planned);
      auto opened = env->open_random(path_join(step_dir, f.name));
      s = opened.status();
      if (s.is_ok()) {
        again.opened = std::move(*opened);
        again.version = again.opened->version();
        if (options.in_place) {
          dst = destinations(f, checked, sr.targets_, Targets::kAll);
          wrote_live = wrote_live || !checked.empty();
        } else {
          if (any_fresh) dst = destinations(f, checked, sr.targets_, Targets::kFresh);
          again.reads = live_reads(f, sr.targets_, checked);
          // a remote file has no page cache: copy_out's second read comes from the checked
          // bytes, of which the cache keeps what that read wants (none of the fresh targets')
          if (!again.reads.empty() && again.opened->read_profile().remote) {
            again.cache = std::make_unique<ReadCache>(
                *again.opened, default_cache_budget(again.opened->size()));  // a cap
            auto copy = plan_reads(again.reads, options, again.cache->read_profile(),
                                   false);  // as copy_out will read them
            s = copy.status();
            if (s.is_ok()) again.cache->keep_only(chunk_ranges(*copy));
          }
        }
      }
      if (s.is_ok()) {
        const RandomAccessFile& file = again.cache ? *again.cache : *again.opened;
        s = read_entries(file, checked, dst, true, options, &ps, &sr.stats_);
      }
    } else {
      s = planned.status();
    }
    if (!s.is_ok()) {
      lost.push_back(f.name);
      reasons.push_back(s.message());
      continue;
    }
    ++sr.stats_.files;
    for (const CheckedRead& r : checked) ++(r.whole ? sr.stats_.boxes : sr.stats_.chunks);
    sr.stats_.bytes_read += ps.read_bytes;
    if (!dst.empty() && !options.in_place) sr.stats_.bytes_fresh += filled_bytes(checked, dst);
    if (again.cache) sr.stats_.bytes_cached += again.cache->held_bytes();
    if (!options.in_place && !again.reads.empty()) {
      again.file = fi;
      sr.reread_.push_back(std::move(again));
    }
  }
  if (!lost.empty()) {
    std::string msg = step_dir + ": " + std::to_string(lost.size()) +
                      (lost.size() == 1 ? " rank file" : " rank files") + " missing or damaged (" +
                      reasons.front() +
                      (reasons.size() > 1 ? "; and " + std::to_string(reasons.size() - 1) + " more"
                                          : std::string()) +
                      ")";
    auto loss = store::account_loss(sr.index_, lost);
    if (loss.is_ok()) {
      for (const std::string& line : loss->lines()) msg += "; " + line;
    }
    return corrupt(msg + (wrote_live ? "; restored in place: the live shards are partly overwritten"
                                     : "; nothing was restored"));
  }
  return sr;
}

Status ShardRead::copy_out() {
  if (copied_) return invalid_argument("ShardRead::copy_out: already copied");
  copied_ = true;
  for (Reread& r : reread_) {  // check first: what prepare checked and dropped, read again
    const RandomAccessFile& file = r.cache ? *r.cache : *r.opened;
    const std::vector<Dest> dst =
        destinations(plan_.files[r.file], r.reads, targets_, Targets::kLive);
    PipelineStats ps;
    Status s = read_entries(file, r.reads, dst, false, options_, &ps, &stats_);
    if (s.is_ok() && !r.version.empty() && r.opened->version() != r.version) {
      s = io_error(file.path() +
                   ": changed while it was being restored (written to between the check and the "
                   "copy)");
    }
    if (!s.is_ok()) {
      return Status(s.code(),
                    s.message() + "; the live shards are partly overwritten; restore again");
    }
    stats_.bytes_reread += ps.read_bytes;
    r = Reread{};  // the file closed, the cache freed
  }
  reread_.clear();
  return Status::ok();
}

}  // namespace ckpt::resume
