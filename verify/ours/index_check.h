// The checks `ckpt verify` and `ckpt audit` make of a sharded checkpoint's INDEX (format version
// 2, docs/format.md §8), beyond the file hashes: the INDEX is the one COMMIT.json lists (size
// and XXH3, and its head's XXH3 that a restoring rank checks), it decodes (bounds-checked:
// store::decode_index), the boxes of every tensor tile it exactly (store::check_index_tiling: gaps
// and overlaps named with the tensor and element range), and every rank file the index names is
// listed in COMMIT.json and present with its listed size. When rank files are missing or damaged
// (absent, short, or named by the caller from a failed hash), store::account_loss says which
// tensors and element ranges they take with them. Pure over the Env; no HDF5.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ckpt/format/manifest.h"
#include "ckpt/io/env.h"
#include "ckpt/store/box_index.h"
#include "ckpt/store/box_tiling.h"

namespace ckpt::verify {

struct IndexCheck {
  bool present = false;               // COMMIT.json lists an INDEX (a version-2 checkpoint)
  bool decoded = false;               // it matched its record and decoded
  bool tiled = false;                 // every tensor's boxes tile it
  std::vector<std::string> problems;  // one line each: hash, decode, tiling, missing files
  uint64_t tensors = 0, boxes = 0, files = 0;
  std::vector<std::string> damaged_files;           // rank files the index names that are lost
  store::LossReport loss;                           // what they take with them
  std::vector<std::string> loss_lines;              // loss.lines(), every range
  std::shared_ptr<const store::GlobalIndex> index;  // the decoded INDEX (when decoded)
};

// `damaged` names rank files already known to be damaged (a hash check failed): their boxes
// count as lost too.
IndexCheck check_index(Env* env, const std::string& step_dir, const CommitRecord& rec,
                       const std::vector<std::string>& damaged = {});

// The rank files ("rank-00003.h5") that problem lines of store::verify_checkpoint name.
std::vector<std::string> rank_files_named(const std::vector<std::string>& problems);

}  // namespace ckpt::verify
