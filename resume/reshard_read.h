// ShardRead: fills live local shards from a sharded checkpoint (format version 2) saved at any
// layout — the restore half of docs/format.md §8.
//
// prepare() reads the step's COMMIT.json and INDEX (its size and XXH3 checked against the
// record), decodes the index (bounds-checked), runs the tiling check, plans every target's runs
// (resume/reshard_plan.h) and reads every saved box the runs touch — whole, or, when the rank
// file's manifest has the box's chunk digests, only the chunks the runs touch — through the
// planned pipeline (resume/pipeline.h: coalesced positioned reads on I/O threads, each box's or
// chunk's XXH3 checked while its bytes are hot), into scratch memory it owns. Only the rank files
// the targets overlap are opened. Nothing of the targets is written: a missing, truncated or
// damaged rank file, a box that fails its hash, an index that does not tile, or a target of another
// dtype or outside its tensor is refused first, naming the file and, for lost files, every tensor
// and element range they held (store::account_loss). copy_out() then copies the runs into the
// targets.
//
// With ShardReadOptions::in_place, a read (a box or a chunk) that lands inside one target run goes
// straight into the target instead (hashed as it lands: the same checks, no scratch and no copy
// for it; a chunk that straddles two runs still goes through the scratch); a failed
// prepare may then leave those targets partly overwritten. When the layouts match, that is every
// byte: the restore needs no second copy of the state in memory.
//
// Memory: the scratch holds every touched box once (about this rank's share of the state when
// the layouts match; up to the boxes that overlap its shards when they do not). Not thread-safe;
// one thread prepares and copies.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ckpt/base/status.h"
#include "ckpt/format/dtype.h"
#include "ckpt/io/env.h"
#include "ckpt/store/box_index.h"
#include "resume/reshard_plan.h"

namespace ckpt::resume {

struct ShardTarget {
  std::string tensor;    // the tensor's name in the index: its dataset path, "/model/0.weight"
  store::Extent extent;  // the global elements the local shard holds
  DType dtype = DType::kFloat32;
  void* data = nullptr;  // row-major, nbytes long (the extent's elements × the dtype's size)
  uint64_t nbytes = 0;
};

struct ShardReadStats {
  size_t files = 0;             // rank files opened
  size_t boxes = 0;             // saved boxes read whole and checked
  size_t chunks = 0;            // chunks of other saved boxes read and checked (their digests)
  uint64_t bytes_read = 0;      // from the files (coalesced padding included)
  uint64_t bytes_copied = 0;    // into the targets by copy_out
  uint64_t bytes_in_place = 0;  // into the targets by prepare (in_place)
};

struct ShardReadOptions {
  unsigned io_threads = 0;  // 0: io_threads_for(file, 0)
  bool in_place = false;    // reads that fit one run go straight into the targets (see above)
};

class ShardRead {
 public:
  static Result<ShardRead> prepare(Env* env, const std::string& step_dir,
                                   std::vector<ShardTarget> targets,
                                   const ShardReadOptions& options = {});
  // Copies every run not read in place into its target. Call once, after prepare succeeded.
  Status copy_out();
  const ShardReadStats& stats() const { return stats_; }
  const store::GlobalIndex& index() const { return index_; }

 private:
  std::vector<ShardTarget> targets_;
  store::GlobalIndex index_;
  ReshardPlan plan_;
  // The bytes of each touched saved box, by index box id (null for untouched boxes).
  std::vector<std::unique_ptr<unsigned char[]>> box_bytes_;
  // Per plan file, in file-offset order: the reads that went through the box scratch (every
  // read without in_place).
  std::vector<std::vector<FileRead>> scratch_;
  ShardReadStats stats_;
  bool copied_ = false;
};

// The decoded INDEX of `step_dir` (its bytes checked against COMMIT.json first); kNotFound when
// the checkpoint has none (format version 1).
// `record`, when given, receives the commit record.
Result<store::GlobalIndex> read_step_index(Env* env, const std::string& step_dir,
                                           CommitRecord* record = nullptr);

}  // namespace ckpt::resume
