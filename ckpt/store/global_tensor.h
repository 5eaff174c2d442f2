// A global tensor read whole from a committed checkpoint (docs/format.md §8): from the boxes the
// INDEX lists for it (format version 2), or from rank 0's dataset (version 1, or a tensor the
// INDEX does not list). Each piece is read with one positioned read, its XXH3 checked against the
// record that lists it, and copied into its place in the row-major result. Used by `ckpt export`
// and by the auditor's reader of our format (`ckpt diff --deep` of sharded checkpoints). Not
// thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "ckpt/base/status.h"
#include "ckpt/format/dtype.h"
#include "ckpt/io/env.h"
#include "ckpt/store/box_index.h"

namespace ckpt::store {

// Where some elements of a tensor are: a box of the global tensor, row-major in `file`.
struct TensorPiece {
  Extent extent;
  std::string file;
  uint64_t offset = 0, nbytes = 0, xxh3 = 0;
  std::string label;        // "box 3 [0:4, 0:8]" or "tensor" (a whole dataset), for messages
  bool from_index = false;  // its XXH3 is the INDEX's (else the manifest's)
};

// The pieces the INDEX lists for tensor `t`.
std::vector<TensorPiece> index_pieces(const GlobalIndex& index, size_t t);

class GlobalTensorReader {
 public:
  GlobalTensorReader(Env* env, std::string step_dir) : env_(env), dir_(std::move(step_dir)) {}

  // Fills `dst` (numel(shape) × dtype's size bytes) with tensor `source` ("/model/0.weight"):
  // Corrupt, naming the file, the piece and the tensor, when a piece has the wrong size or hash.
  Status assemble(const std::string& source, DType dtype, const std::vector<int64_t>& shape,
                  const std::vector<TensorPiece>& pieces, char* dst);
  uint64_t pieces_checked() const { return checked_; }

 private:
  Result<RandomAccessFile*> file(const std::string& path);

  Env* const env_;
  const std::string dir_;
  std::map<std::string, std::unique_ptr<RandomAccessFile>> open_;
  std::string box_;
  uint64_t checked_ = 0;
};

}  // namespace ckpt::store
