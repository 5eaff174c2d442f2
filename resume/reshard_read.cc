#include "resume/reshard_read.h"

#include <algorithm>
#include <cstring>
#include <optional>

#include "ckpt/base/hash.h"
#include "ckpt/store/box_tiling.h"
#include "ckpt/store/commit_index.h"
#include "ckpt/store/run_dir.h"
#include "resume/pipeline.h"
#include "resume/read_plan.h"

namespace ckpt::resume {
namespace {

// Reads a plan of boxes and chunks: a chunk that is one whole read goes straight into its
// destination; coalesced small reads go through the worker's staging buffer. A read whose
// destination is null is hashed in the staging buffer and dropped.
class BoxSink final : public ChunkSink {
 public:
  BoxSink(const ReadPlan& plan, std::vector<unsigned char*> dst, unsigned workers)
      : plan_(plan), dst_(std::move(dst)), staging_(workers) {}

  Result<unsigned char*> acquire(unsigned worker, const PlanChunk& c) override {
    if (bytes_stay(c)) {
      const PlanPiece& p = plan_.pieces[c.first_piece];
      return dst_[p.tensor] + p.tensor_offset;
    }
    if (worker >= staging_.size()) return internal_error("shard read: worker out of range");
    staging_[worker].resize(c.nbytes);
    return staging_[worker].data();
  }
  Status deliver(unsigned, const PlanChunk& c, unsigned char* bytes) override {
    if (bytes_stay(c)) return Status::ok();
    for (uint32_t k = 0; k < c.piece_count; ++k) {
      const PlanPiece& p = plan_.pieces[c.first_piece + k];
      if (dst_[p.tensor] == nullptr) continue;
      std::memcpy(dst_[p.tensor] + p.tensor_offset, bytes + p.chunk_offset, p.nbytes);
    }
    return Status::ok();
  }
  Status release(unsigned, const PlanChunk&, unsigned char*) override { return Status::ok(); }
  bool bytes_stay(const PlanChunk& c) const override {
    return plan_.is_direct(c) && dst_[plan_.pieces[c.first_piece].tensor] != nullptr;
  }

 private:
  const ReadPlan& plan_;
  std::vector<unsigned char*> dst_;  // per plan tensor; null: hash only
  std::vector<std::vector<unsigned char>> staging_;
};

// Runs `entries` of `file` through the pipeline into dst (per entry; null: hashed and dropped),
// hashed or not.
Status read_entries(const RandomAccessFile& file, const std::vector<ManifestEntry>& entries,
                    const std::vector<unsigned char*>& dst, bool verify, unsigned io_threads,
                    PipelineStats* ps) {
  CKPT_ASSIGN_OR_RETURN(ReadPlan rp, make_read_plan(entries, PlanOptions{8u << 20, 64u << 10, 0}));
  std::vector<unsigned char*> by_plan(rp.tensors.size());
  for (size_t t = 0; t < rp.tensors.size(); ++t) by_plan[t] = dst[rp.tensors[t].manifest_index];
  const unsigned threads = io_threads_for(file, io_threads);
  BoxSink sink(rp, std::move(by_plan), threads);
  return run_pipeline(file, rp, &sink, PipelineOptions{threads, verify, false, 0}, ps);
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

// The bytes of `name` in step_dir, checked against its entry in the commit record (size and
// XXH3); kNotFound when the record does not list it.
Result<std::string> read_listed(Env* env, const std::string& step_dir, const CommitRecord& record,
                                const std::string& name, const std::string& unlisted) {
  const std::string path = path_join(step_dir, name);
  const auto listed = std::find_if(record.files.begin(), record.files.end(),
                                   [&](const CommitFile& f) { return f.name == name; });
  if (listed == record.files.end()) return not_found(unlisted);
  CKPT_ASSIGN_OR_RETURN(std::string bytes, env->read_all(path, listed->bytes + 1));
  if (bytes.size() != listed->bytes) {
    return corrupt(path + ": " + std::to_string(bytes.size()) + " bytes, the commit record says " +
                   std::to_string(listed->bytes));
  }
  const uint64_t got = xxh3_64(bytes.data(), bytes.size());
  if (got != listed->xxh3) {
    return corrupt(path + ": xxh3 of the file is " + hex64(got) + ", the commit record says " +
                   hex64(listed->xxh3));
  }
  return bytes;
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

// With in_place: for each read, the run it goes straight into, or -1 when it goes through the
// box scratch (it straddles runs: a chunk that begins before a run does); copy_out copies only
// what went through the scratch.
std::vector<int64_t> direct_runs(const ReshardFile& f, const std::vector<CheckedRead>& reads) {
  std::vector<int64_t> into(reads.size(), -1);
  for (size_t i = 0; i < reads.size(); ++i) {
    const uint64_t a = reads[i].entry.offset, b = a + reads[i].entry.nbytes;
    // runs are in file-offset order: the first that ends after a, then every one that starts
    // before b
    auto it = std::partition_point(f.runs.begin(), f.runs.end(), [&](const ReshardRun& r) {
      return r.file_offset + r.nbytes <= a;
    });
    if (it == f.runs.end() || it->file_offset > a || it->file_offset + it->nbytes < b) continue;
    const auto next = std::next(it);
    if (next != f.runs.end() && next->file_offset < b) continue;  // two runs share those bytes
    into[i] = it - f.runs.begin();
  }
  return into;
}

// Where the bytes of `r`, a read that fits run `run` of `f`, land in that run's target.
unsigned char* run_target(const ReshardFile& f, const std::vector<ShardTarget>& targets,
                          int64_t run, const CheckedRead& r) {
  const ReshardRun& rr = f.runs[static_cast<size_t>(run)];
  return static_cast<unsigned char*>(targets[rr.target].data) + rr.dst_offset +
         (r.entry.offset - rr.file_offset);
}

// Reads and checks `reads` of one rank file: a read with a run in `into` (>= 0) straight into
// that run's target — or, with `drop_fits`, hashed and dropped (copy_out reads it again) — the
// others into the scratch of their boxes (allocated here, whole; only the bytes read are touched).
Status read_checked(const RandomAccessFile& file, const store::GlobalIndex& index,
                    const ReshardFile& f, const std::vector<CheckedRead>& reads,
                    const std::vector<int64_t>& into, const std::vector<ShardTarget>& targets,
                    bool drop_fits, unsigned io_threads,
                    std::vector<std::unique_ptr<unsigned char[]>>* box_bytes, PipelineStats* ps) {
  std::vector<uint32_t> scratch;  // the boxes some read goes through the scratch of
  for (size_t i = 0; i < reads.size(); ++i) {
    if (into[i] < 0) scratch.push_back(reads[i].box);
  }
  std::sort(scratch.begin(), scratch.end());
  for (const TouchedBox& tb : f.boxes) {
    if (!std::binary_search(scratch.begin(), scratch.end(), tb.box)) continue;
    (*box_bytes)[tb.box].reset(
        new unsigned char[std::max<uint64_t>(index.box_nbytes(tb.tensor, tb.box), 1)]);
  }
  std::vector<ManifestEntry> entries;
  std::vector<unsigned char*> dst;
  entries.reserve(reads.size());
  dst.reserve(reads.size());
  for (size_t i = 0; i < reads.size(); ++i) {
    const CheckedRead& r = reads[i];
    entries.push_back(r.entry);
    if (into[i] < 0) {
      dst.push_back((*box_bytes)[r.box].get() + r.box_offset);
    } else {
      dst.push_back(drop_fits ? nullptr : run_target(f, targets, into[i], r));
    }
  }
  return read_entries(file, entries, dst, true, io_threads, ps);
}

}  // namespace

Result<store::GlobalIndex> read_step_index(Env* env, const std::string& step_dir,
                                           CommitRecord* record) {
  CKPT_ASSIGN_OR_RETURN(CommitRecord rec, store::read_commit(env, step_dir));
  if (record != nullptr) *record = rec;
  CKPT_ASSIGN_OR_RETURN(
      std::string bytes,
      read_listed(env, step_dir, rec, store::kIndexFileName,
                  step_dir +
                      ": no INDEX in COMMIT.json (a format version 1 checkpoint holds no sharded "
                      "tensors)"));
  const std::string path = path_join(step_dir, store::kIndexFileName);
  return store::decode_index(bytes, path);
}

Result<ShardRead> ShardRead::prepare(Env* env, const std::string& step_dir,
                                     std::vector<ShardTarget> targets,
                                     const ShardReadOptions& options) {
  ShardRead sr;
  sr.targets_ = std::move(targets);
  CommitRecord record;
  CKPT_ASSIGN_OR_RETURN(sr.index_, read_step_index(env, step_dir, &record));
  const std::string index_path = path_join(step_dir, store::kIndexFileName);
  CKPT_RETURN_IF_ERROR(store::tiling_status(store::check_index_tiling(sr.index_), index_path));
  // Empty local shards (3 rows over 4 ranks) read nothing; the plan numbers the others.
  std::vector<ShardTarget> all = std::move(sr.targets_);
  sr.targets_.clear();
  std::vector<TargetBox> boxes;
  for (ShardTarget& t : all) {
    if (t.extent.empty()) {
      if (t.nbytes != 0)
        return invalid_argument("tensor \"" + t.tensor + "\": an empty shard of " +
                                std::to_string(t.nbytes) + " bytes");
      continue;
    }
    boxes.push_back({t.tensor, t.extent});
    sr.targets_.push_back(std::move(t));
  }
  CKPT_ASSIGN_OR_RETURN(sr.plan_, plan_reshard(sr.index_, boxes));
  for (size_t i = 0; i < sr.targets_.size(); ++i) {
    CKPT_RETURN_IF_ERROR(check_target(sr.index_, sr.targets_[i], sr.plan_.target_bytes[i]));
  }
  sr.box_bytes_.resize(sr.index_.box_count());
  bool wrote_live = false;           // some read went straight into a target (in_place)
  std::vector<std::string> lost;     // rank files that could not be read whole and checked
  std::vector<std::string> reasons;  // why, one each
  for (const ReshardFile& f : sr.plan_.files) {
    // The file's manifest, for its boxes' chunk digests, when a box is read only in part (a
    // damaged or missing manifest costs only that: the boxes are read whole).
    std::optional<Manifest> manifest;
    if (reads_part_of_a_box(sr.index_, f, kBoxChunkBytes)) {
      auto m = read_listed_manifest(env, step_dir, record, f.name);
      if (m.is_ok()) manifest = std::move(*m);
    }
    Status s = Status::ok();
    PipelineStats ps;
    std::vector<CheckedRead> reads;
    std::vector<int64_t> into;
    Reread again;
    auto planned = checked_reads(sr.index_, f, manifest ? &*manifest : nullptr);
    if (planned.is_ok()) {
      reads = std::move(*planned);
      into = direct_runs(f, reads);
      auto opened = env->open_random(path_join(step_dir, f.name));
      s = opened.status();
      if (s.is_ok()) {
        again.opened = std::move(*opened);
        again.version = again.opened->version();
        uint64_t fit_bytes = 0;
        for (size_t i = 0; i < reads.size(); ++i) {
          if (into[i] >= 0) fit_bytes += reads[i].entry.nbytes;
        }
        // a remote file has no page cache: copy_out's second read comes from the checked bytes
        if (!options.in_place && fit_bytes > 0 && again.opened->read_profile().remote) {
          again.cache = std::make_unique<ReadCache>(
              *again.opened, default_cache_budget(again.opened->size()));  // a cap: what is read
        }
        const RandomAccessFile& file = again.cache ? *again.cache : *again.opened;
        wrote_live = wrote_live || (options.in_place && fit_bytes > 0);
        s = read_checked(file, sr.index_, f, reads, into, sr.targets_, !options.in_place,
                         options.io_threads, &sr.box_bytes_, &ps);
      }
    } else {
      s = planned.status();
    }
    std::vector<FileRead>& scratch = sr.scratch_.emplace_back();  // in file-offset order
    for (size_t i = 0; i < reads.size(); ++i) {
      if (into[i] < 0) scratch.push_back({reads[i].entry.offset, reads[i].entry.nbytes});
    }
    std::sort(scratch.begin(), scratch.end(),
              [](const FileRead& x, const FileRead& y) { return x.offset < y.offset; });
    if (!s.is_ok()) {
      lost.push_back(f.name);
      reasons.push_back(s.message());
      continue;
    }
    ++sr.stats_.files;
    for (const CheckedRead& r : reads) ++(r.whole ? sr.stats_.boxes : sr.stats_.chunks);
    sr.stats_.bytes_read += ps.read_bytes;
    for (size_t i = 0; i < reads.size(); ++i) {
      if (into[i] < 0) continue;
      if (options.in_place) {
        sr.stats_.bytes_in_place += reads[i].entry.nbytes;
      } else {
        again.entries.push_back(reads[i].entry);
        again.dst.push_back(run_target(f, sr.targets_, into[i], reads[i]));
      }
    }
    if (!again.entries.empty()) {
      again.io_threads = options.io_threads;
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
    PipelineStats ps;
    Status s = read_entries(file, r.entries, r.dst, false, r.io_threads, &ps);
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
    for (const ManifestEntry& e : r.entries) stats_.bytes_in_place += e.nbytes;
    r = Reread{};  // the file closed, the cache freed
  }
  reread_.clear();
  for (size_t i = 0; i < plan_.files.size(); ++i) {
    const std::vector<FileRead>& scratch = scratch_[i];
    for (const ReshardRun& r : plan_.files[i].runs) {
      // the bytes of the run that went through the scratch (none when it was read in place)
      const uint64_t end = r.file_offset + r.nbytes;
      auto it = std::partition_point(scratch.begin(), scratch.end(), [&](const FileRead& x) {
        return x.offset + x.nbytes <= r.file_offset;
      });
      for (; it != scratch.end() && it->offset < end; ++it) {
        const uint64_t from = std::max(r.file_offset, it->offset);
        const uint64_t to = std::min(end, it->offset + it->nbytes);
        const unsigned char* box = box_bytes_[r.box].get();
        auto* dst = static_cast<unsigned char*>(targets_[r.target].data);
        std::memcpy(dst + r.dst_offset + (from - r.file_offset),
                    box + (from - index_.box_offset(r.box)), to - from);
        stats_.bytes_copied += to - from;
      }
    }
  }
  box_bytes_.clear();
  return Status::ok();
}

}  // namespace ckpt::resume
