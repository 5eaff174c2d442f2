// ReshardPlan: the byte ranges a restoring rank reads from a sharded checkpoint (format version
// 2) to fill its live local shards, whatever the layout it was saved with.
//
// Each target is a box of a global tensor that one live local shard covers, held row-major and
// contiguous in the shard's memory. plan_reshard intersects every target with the saved boxes of
// its tensor, found from the index's grid (directly by cell for the regular grids of Shard(d)
// layouts, by a binary search over the tensor's boxes in cell order otherwise), turns each
// intersection into runs contiguous both in the saved box and in the target (a row-major sub-box
// is one run when it spans the trailing dimensions of both, else one run per row of the leading
// ones: maximal in both by construction), and groups the runs by rank file, in file-offset order,
// with the reads that cover them (runs whose file ranges touch merged into one read). Only the
// files the targets overlap appear, so a rank opens only those.
//
// Adapter to the planned reader (resume/read_plan.h): a run reads part of a saved box, which
// cannot be checked against the box's XXH3. To check every byte before anything live is written,
// read the whole boxes a file's runs touch — box_entries() gives them as ManifestEntry values for
// make_read_plan — or, where the file's manifest has the boxes' chunk digests, only the chunks
// the runs touch (checked_reads), and copy the runs out of them (resume/reshard_read.h does).
// Pure: no I/O. A plan is an immutable value; any number of threads may read it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ckpt/base/status.h"
#include "ckpt/format/manifest.h"
#include "ckpt/store/box_index.h"

namespace ckpt::resume {

struct TargetBox {
  std::string tensor;    // the tensor's name in the index
  store::Extent extent;  // the global elements this local shard holds
};

struct ReshardRun {
  uint32_t target = 0;       // index into the targets given to plan_reshard
  uint32_t box = 0;          // the saved box read from (index box id)
  uint64_t file_offset = 0;  // bytes, in the rank file
  uint64_t dst_offset = 0;   // bytes, in the target's row-major buffer
  uint64_t nbytes = 0;
};

// One read of a rank file: adjacent runs merged.
struct FileRead {
  uint64_t offset = 0;
  uint64_t nbytes = 0;
};

struct TouchedBox {
  uint32_t tensor = 0;  // index tensor id
  uint32_t box = 0;     // index box id
};

struct ReshardFile {
  uint32_t file = 0;              // index file id
  std::string name;               // "rank-00003.h5"
  std::vector<ReshardRun> runs;   // file-offset order: where each byte read goes
  std::vector<FileRead> reads;    // file-offset order: the runs' ranges, adjacent ones merged
  std::vector<TouchedBox> boxes;  // the saved boxes the runs read from, box order
  uint64_t run_bytes = 0;         // sum of runs
  uint64_t box_bytes = 0;         // sum of the whole touched boxes
};

struct ReshardPlan {
  std::vector<ReshardFile> files;      // file id order; only files some target overlaps
  std::vector<uint64_t> target_bytes;  // per target: its buffer's size
  uint64_t run_bytes = 0;
  uint64_t box_bytes = 0;
  uint64_t records_read = 0;  // box records of the index the planner looked at
};

// On failure: kNotFound (a target names a tensor the index lacks), kInvalidArgument (a target of
// another rank or outside its tensor), kCorrupt (the saved boxes cover another number of the
// target's elements than it has: the index does not tile; the message names tensor and target).
// A gap and an overlap inside one target could cancel out: a restore runs check_index_tiling
// (ckpt/store/box_tiling.h) on the index first, which names every gap and overlap exactly.
Result<ReshardPlan> plan_reshard(const store::GlobalIndex& index,
                                 const std::vector<TargetBox>& targets);

// The saved boxes the targets meet, (tensor, box) in box order, each once: the records a partial
// index (store::decode_index_head) must load before plan_reshard. Needs only the index's head.
// Fails as plan_reshard does on an unknown tensor or a target outside its tensor.
Result<std::vector<TouchedBox>> boxes_for_targets(const store::GlobalIndex& index,
                                                  const std::vector<TargetBox>& targets);

// The whole saved boxes `file` touches, as manifest entries (path = dataset, shape = box sizes)
// for make_read_plan and the hash-checking pipeline.
std::vector<ManifestEntry> box_entries(const store::GlobalIndex& index, const ReshardFile& file);

// What to read of a touched box and check before its runs are copied out: one entry for
// make_read_plan and the pipeline, `box_offset` bytes into box `box`.
struct CheckedRead {
  ManifestEntry entry;
  uint32_t box = 0;  // index box id
  uint64_t box_offset = 0;
  bool whole = true;  // the whole box, else one chunk of it
};

// The reads that check everything `file`'s runs take: each touched box whole, unless `manifest`
// (the file's, nullptr when not read) gives the box's chunk digests (docs/format.md §4) and the
// runs leave some chunk untouched: then only the chunks the runs touch, one entry each (path
// "<dataset> bytes [a, b)", its chunk's digest). kCorrupt when the manifest's entry for a touched
// box disagrees with the index (offset, size or digest).
Result<std::vector<CheckedRead>> checked_reads(const store::GlobalIndex& index,
                                               const ReshardFile& file, const Manifest* manifest);
// Whether some touched box of `file` larger than min_bytes is read only in part: whether the
// file's manifest could spare reading the rest.
bool reads_part_of_a_box(const store::GlobalIndex& index, const ReshardFile& file,
                         uint64_t min_bytes);

}  // namespace ckpt::resume
