// The INDEX of a checkpoint that holds pieces of global tensors (format version 2, docs/format.md
// §8), built by rank 0 at commit from the ranks' manifests: every box a rank wrote (its file,
// dataset, byte offset, XXH3 and element range), grouped by tensor. Pure: no I/O.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ckpt/base/status.h"
#include "ckpt/format/manifest.h"

namespace ckpt::store {

// The file name of the index inside a step directory.
inline constexpr char kIndexFileName[] = "INDEX";

// The INDEX bytes of a checkpoint whose rank files are described by `manifests`, or nullopt when
// no manifest lists a box (a version-1 checkpoint has no INDEX). Refuses (kInvalidArgument,
// naming `dir`, the tensor and the ranks) a tensor whose ranks disagree on its dtype, global
// shape or placement, and (kCorrupt) boxes that do not tile their tensor exactly — a gap (a
// replica nobody wrote, a rank that lost a shard) or an overlap — so no checkpoint is committed
// that a restore could not read back whole.
Result<std::optional<std::string>> build_commit_index(const std::vector<Manifest>& manifests,
                                                      int64_t step, const std::string& dir);

}  // namespace ckpt::store
