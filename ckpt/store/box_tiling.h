// Proofs over the boxes of a sharded checkpoint (format version 2): that the boxes of every
// global tensor tile it exactly — no gap, no overlap, nothing outside its bounds — and, when rank
// files are missing or damaged, which tensors and element ranges are lost with them.
//
// The tiling check is a recursive sweep: along dimension 0 the box boundaries cut the tensor into
// slabs; in each slab the boxes that cross it must tile the remaining dimensions, checked the
// same way; along the last dimension a slab crossed by no box is a gap and one crossed by two is
// an overlap. The work is per slab, never per element: O(n log n + the number of (slab, box)
// pairs), n log n for the usual grids of Shard(d) layouts. Pure; thread-compatible.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "ckpt/base/status.h"
#include "ckpt/store/box_index.h"

namespace ckpt::store {

enum class TilingProblem : uint8_t { kGap, kOverlap, kOutOfBounds };
const char* tiling_problem_name(TilingProblem p);

struct TilingFinding {
  TilingProblem problem = TilingProblem::kGap;
  std::string tensor;
  Extent range;               // the elements in no box, in both boxes, or the offending box
  std::vector<size_t> boxes;  // the boxes involved (indices into the list checked): 0, 1 or 2
  std::string message;        // one line: tensor, problem, element range, boxes
};

struct TilingReport {
  std::vector<TilingFinding> findings;  // at most max_findings
  uint64_t left_off = 0;                // further findings not listed
  uint64_t tensors = 0, boxes = 0;      // what was checked
  bool ok() const { return findings.empty() && left_off == 0; }
};

// Names box i in messages, e.g. "box 3 [0:4, 0:8] in rank-00001.h5".
using BoxLabel = std::function<std::string(size_t box)>;

// Checks the boxes of one tensor of global `shape` (empty boxes cover nothing and are fine).
void check_tensor_tiling(std::string_view tensor, const std::vector<int64_t>& shape,
                         const std::vector<Extent>& boxes, TilingReport* report,
                         size_t max_findings = 64, const BoxLabel& label = nullptr);

// Every tensor of the index (a tensor whose boxes are one per cell tiles it by construction; a
// partial index's tensors need only their cells, which its head holds).
TilingReport check_index_tiling(const GlobalIndex& index, size_t max_findings = 64);

// ok, or kCorrupt "<where>: boxes do not tile: <first finding> (and N more)".
Status tiling_status(const TilingReport& report, const std::string& where);

// What a set of missing or damaged rank files takes with it.
struct LostTensor {
  std::string tensor;
  std::vector<Extent> ranges;      // the lost boxes' element ranges, in cell order
  std::vector<std::string> files;  // the lost files that held them, sorted
  uint64_t lost_elements = 0, total_elements = 0;
  bool whole() const { return lost_elements == total_elements; }
};

struct LossReport {
  std::vector<LostTensor> tensors;  // index order; only tensors that lose something
  uint64_t lost_bytes = 0;
  // "tensor \"w\" loses [0:4, 0:16] (rank-00001.h5)" per tensor, ranges capped at `max_ranges`.
  std::vector<std::string> lines(size_t max_ranges = 8) const;
};

// `files` are file ids of the index (of a partial index: what its loaded records say the files
// held). On failure (an unknown id) kInvalidArgument.
Result<LossReport> account_loss(const GlobalIndex& index, const std::vector<uint32_t>& files);
// The same by file name ("rank-00003.h5"); an unknown name is kInvalidArgument.
Result<LossReport> account_loss(const GlobalIndex& index, const std::vector<std::string>& files);

}  // namespace ckpt::store
