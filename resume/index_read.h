// The INDEX of a sharded checkpoint (docs/format.md §8), read for a restore: only what the
// restoring rank's targets need. An index version 2 file listed in COMMIT.json with the XXH3 of
// its head is read in parts: the head (header, tensors, grids, files; checked against that hash
// before anything in it is used), then the 16-byte records of the saved boxes the targets meet
// (resume/reshard_plan.h: boxes_for_targets), in few coalesced reads. A record is not checked
// by a hash of its own: it names the bytes of a box and that box's XXH3, and the restore checks
// the box's bytes against it before anything live is written, so a damaged record fails that
// check (a message names the rank file; `ckpt verify` tells whether the INDEX or the file is
// damaged). An index version 1 file, a record without the head's hash, or a file below
// `whole_below` bytes is read whole and checked against the record's size and XXH3.
// Stateless; thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ckpt/base/status.h"
#include "ckpt/format/manifest.h"
#include "ckpt/io/env.h"
#include "ckpt/store/box_index.h"
#include "resume/reshard_plan.h"

namespace ckpt::resume {

struct IndexReadOptions {
  uint64_t whole_below = 64 << 10;  // a smaller INDEX is read whole, in one read
  uint64_t first_read = 16 << 10;   // the first read: the header and, usually, the head
  uint64_t merge_gap = 4096;        // records this close are read in one read
};

struct IndexReadStats {
  uint64_t file_bytes = 0;  // the INDEX's size
  uint64_t bytes = 0;       // read from it
  size_t reads = 0;         // read requests made
  bool whole = false;       // read whole (version 1, no head hash, or small)
};

// The index of `step_dir` (whose commit record is `record`), holding at least the records of
// every saved box `targets` meet. kNotFound when the record lists no INDEX (format version 1);
// kCorrupt when the INDEX's size or a hash disagrees with the record, or its bytes do not decode;
// the failures of boxes_for_targets.
Result<store::GlobalIndex> read_index_for(Env* env, const std::string& step_dir,
                                          const CommitRecord& record,
                                          const std::vector<TargetBox>& targets,
                                          const IndexReadOptions& options = {},
                                          IndexReadStats* stats = nullptr);

// The bytes of `name` in step_dir, checked against its entry in the commit record (size and
// XXH3); kNotFound with `unlisted` when the record does not list it.
Result<std::string> read_listed(Env* env, const std::string& step_dir, const CommitRecord& record,
                                const std::string& name, const std::string& unlisted);

}  // namespace ckpt::resume
