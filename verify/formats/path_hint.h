// What a path that is no checkpoint by itself is close to, for the "not a checkpoint" message:
// a piece of a torch.distributed.checkpoint (DCP) folder (its `.metadata`, a `.distcp` data file)
// or a folder that holds DCP folders (torchtitan's `checkpoint/step-N`, one or two levels down).
// Only names and directory listings are read, through `env`, and a bounded number of entries
// (2,000 over both levels) are looked at. Pure apart from those reads; thread-safe.
#pragma once

#include <functional>
#include <string>

#include "ckpt/io/env.h"

namespace ckpt::verify {

// A file that is a piece of a DCP folder: what it is and which folder to pass instead
// ("the metadata file of a torch.distributed.checkpoint (DCP) folder; pass the folder (run)").
// "" for any other path.
std::string dcp_piece_hint(Env* env, const std::string& path);

// Whether a path is a checkpoint.
using IsCheckpoint = std::function<bool(const std::string& path)>;

// A folder that holds checkpoints `is_checkpoint` recognises, up to `max_depth` levels down (a
// checkpoint is not looked into): which, and the newest to pass ("it holds 2 checkpoints
// (checkpoint-3, checkpoint-6); pass one of them, e.g. out/checkpoint-6 (the newest)"; `kind`,
// when given, names them: "2 DCP checkpoints"). "" when it holds none, or `path` is no folder.
std::string checkpoints_below_hint(Env* env, const std::string& path,
                                   const IsCheckpoint& is_checkpoint, const std::string& kind,
                                   int max_depth);

// A folder whose subfolders (or theirs) are DCP folders: which, and the newest to pass
// ("it holds 4 DCP checkpoints (step-2, step-4, step-5, step-6); pass one of them, e.g. ...").
// "" for any other path.
std::string dcp_parent_hint(Env* env, const std::string& path);

}  // namespace ckpt::verify
