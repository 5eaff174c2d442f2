// Synthetic sharded checkpoints for the box-index tests: global tensors whose element i holds a
// known value, cut into boxes by DTensor-style placements, laid out in per-rank "files" (byte
// vectors, each box 4 KiB aligned as format v1 places datasets), with the index that describes
// them. Lets a test apply a ReshardPlan to the saved bytes and compare with the expected target.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ckpt/store/box_index.h"
#include "resume/reshard_plan.h"

namespace ckpt::testing {

// torch.chunk's split of n elements over k parts: part r is [min(r*c, n), min((r+1)*c, n)),
// c = ceil(n / k). Returns (offset, size) of part r.
std::pair<int64_t, int64_t> chunk_range(int64_t n, int64_t k, int64_t r);

// The box rank `rank` holds on a mesh of shape `mesh` (row-major ranks) when mesh dimension m
// shards tensor dimension shard_dim[m] (-1: replicated). Mesh dimensions shard in order, a later
// one cutting the piece an earlier one left (DTensor's left-to-right rule).
store::Extent mesh_box(const std::vector<int64_t>& shape, const std::vector<int64_t>& mesh,
                       const std::vector<int>& shard_dim, int64_t rank);

// "This rank holds no box of the tensor" in the layouts given to save_synthetic.
inline store::Extent nothing() {
  store::Extent e;
  e.ndim = -1;
  return e;
}

struct SyntheticTensor {
  std::string name;
  std::vector<int64_t> shape;
  DType dtype = DType::kInt32;
  uint32_t seed = 0;  // element i of the global tensor is the value seed * 1000003 + i
};

struct SavedCheckpoint {
  std::vector<std::string> files;  // rank-R.h5 bytes
  std::vector<std::string> file_names;
  store::GlobalIndex index;
};

// Saves `tensors`; rank r holds box boxes[t][r] of tensor t, if r < boxes[t].size() and the box
// is not nothing() (empty boxes go to the builder, which drops them). One file per rank.
// `file_of_box`, when given, puts box k of every tensor in file file_of_box[k] instead of k.
SavedCheckpoint save_synthetic(const std::vector<SyntheticTensor>& tensors,
                               const std::vector<std::vector<store::Extent>>& boxes, int64_t ranks,
                               const std::vector<int64_t>& file_of_box = {});

// The expected bytes of `extent` of tensor t, row-major.
std::string expected_bytes(const SyntheticTensor& t, const store::Extent& extent);

// Applies `plan` to the saved files: each target's buffer, filled from the runs.
std::vector<std::string> apply_plan(const SavedCheckpoint& saved, const resume::ReshardPlan& plan);

}  // namespace ckpt::testing
