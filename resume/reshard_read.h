// ShardRead: fills live local shards from a sharded checkpoint (format version 2) saved at any
// layout — the restore half of docs/format.md §8.
//
// prepare() reads the step's COMMIT.json and of its INDEX what the targets need (the head and
// their boxes' records, checked against the record: resume/index_read.h), decodes it
// (bounds-checked), runs the tiling check, plans every target's runs
// (resume/reshard_plan.h) and reads every saved box the runs touch — whole, or, when the rank
// file's manifest has the box's chunk digests, only the chunks the runs touch — through the
// planned pipeline (resume/pipeline.h: coalesced positioned reads on I/O threads, each box's or
// chunk's XXH3 checked while its bytes are hot). Only the rank files the targets overlap are
// opened. Nothing of the targets is written: a missing, truncated or damaged rank file, a box that
// fails its hash, an index that does not tile, or a target of another dtype or outside its tensor
// is refused first, naming the file and, for lost files, every tensor and element range they held
// (store::account_loss). copy_out() then fills the targets.
//
// Check first, as the one-file restore does (restore.h): prepare hashes every read (a box or a
// chunk) and drops its bytes, and copy_out reads them again, unhashed, into the targets — from the
// page cache on a local disk, from a ReadCache (read_cache.h) that kept the checked bytes of a
// remote file. A read that lies within one target run goes straight into the target; one that
// straddles runs (a chunk that begins before its rank's rows do) is read into a staging buffer
// and the part each run holds is copied into its target. The files stay open in between; one
// whose version (RandomAccessFile::version()) changed by the end of copy_out fails it: the
// targets are then partly overwritten.
//
// With ShardReadOptions::in_place, prepare reads into the targets the same way instead (hashed as
// the bytes land: the same checks, one read); a failed prepare may then leave targets partly
// overwritten, and copy_out has nothing left to do. Fresh targets (ShardTarget::fresh) are read
// that way in either mode: copy_out reads again only what live targets hold.
//
// Memory: no copy of the state: staging buffers of a few MiB per I/O thread; over a remote
// store, the ReadCache holds the checked bytes copy_out will read until then. Not thread-safe; one
// thread prepares and copies.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ckpt/base/status.h"
#include "ckpt/format/dtype.h"
#include "ckpt/io/env.h"
#include "ckpt/store/box_index.h"
#include "resume/index_read.h"
#include "resume/read_cache.h"
#include "resume/reshard_plan.h"

namespace ckpt::resume {

struct ShardTarget {
  std::string tensor;    // the tensor's name in the index: its dataset path, "/model/0.weight"
  store::Extent extent;  // the global elements the local shard holds
  DType dtype = DType::kFloat32;
  void* data = nullptr;  // row-major, nbytes long (the extent's elements × the dtype's size)
  uint64_t nbytes = 0;
  // Memory that holds nothing live (allocated for this restore: a fresh optimizer's moments):
  // prepare reads it in place, hashed as the bytes land, even when checking first.
  bool fresh = false;
};

struct ShardReadStats {
  size_t files = 0;               // rank files opened
  size_t boxes = 0;               // saved boxes read whole and checked
  size_t chunks = 0;              // chunks of other saved boxes read and checked (their digests)
  uint64_t bytes_read = 0;        // from the files (coalesced padding included)
  uint64_t bytes_copied = 0;      // into the targets from staging (coalesced or straddling reads)
  uint64_t bytes_in_place = 0;    // read straight from the files into the targets (either read)
  uint64_t bytes_fresh = 0;       // into fresh targets by prepare's checking read
  uint64_t bytes_cached = 0;      // over a remote store: kept in memory for copy_out
  uint64_t bytes_reread = 0;      // read again by copy_out, unhashed (coalesced padding included)
  uint64_t index_bytes_read = 0;  // of the INDEX (its head and the records the targets need)
  size_t index_reads = 0;         // read requests made of the INDEX
};

struct ShardReadOptions {
  unsigned io_threads = 0;  // 0: io_threads_for(file, 0)
  bool in_place = false;    // prepare reads what fits one run straight into the targets (above)
  IndexReadOptions index;   // how much of the INDEX is read (resume/index_read.h)
  // Largest hashed read (a box's bytes are hashed while they are in cache; a remote store's
  // ReadProfile::read_bytes when larger), and largest unhashed one (copy_out's): as
  // RestoreOptions::chunk_bytes and unhashed_chunk_bytes.
  uint64_t chunk_bytes = 1u << 20;
  uint64_t unhashed_chunk_bytes = 8u << 20;
};

class ShardRead {
 public:
  // `known`: the step's commit record when the caller has read it already (find_latest did),
  // else read here.
  static Result<ShardRead> prepare(Env* env, const std::string& step_dir,
                                   std::vector<ShardTarget> targets,
                                   const ShardReadOptions& options = {},
                                   const CommitRecord* known = nullptr);
  // Fills the targets (check first: reads again what prepare checked; in place: nothing left).
  // Call once, after prepare succeeded.
  Status copy_out();
  const ShardReadStats& stats() const { return stats_; }
  const store::GlobalIndex& index() const { return index_; }

 private:
  std::vector<ShardTarget> targets_;
  store::GlobalIndex index_;
  ReshardPlan plan_;
  // Per plan file read (check first): the file, still open, and the reads copy_out reads again.
  struct Reread {
    std::unique_ptr<RandomAccessFile> opened;
    std::unique_ptr<ReadCache> cache;  // over a remote file: the bytes prepare checked
    std::string version;               // opened's before prepare read it
    size_t file = 0;                   // in plan_.files
    std::vector<CheckedRead> reads;    // those that live targets overlap
  };
  ShardReadOptions options_;
  std::vector<Reread> reread_;
  ShardReadStats stats_;
  bool copied_ = false;
};

// The decoded INDEX of `step_dir` (its bytes checked against COMMIT.json first); kNotFound when
// the checkpoint has none (format version 1).
// `record`, when given, receives the commit record.
Result<store::GlobalIndex> read_step_index(Env* env, const std::string& step_dir,
                                           CommitRecord* record = nullptr);

}  // namespace ckpt::resume
