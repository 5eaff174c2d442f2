// The HDF5 side of a rank file (docs/format.md §3): writing its structure and reading it back.
//
// write_structure creates the file with every group, attribute and dataset of a tree, each
// dataset contiguous, unfiltered, allocated at creation and 4 KiB aligned, but does NOT write the
// tensor bytes: it returns each dataset's file offset so ckpt/store can fill the extents with
// plain pwrites (one pass over the bytes, at the speed of the disk, and through Env).
// read_structure walks a file back into a tree whose tensors carry dtype, shape, hash and offset
// but no bytes. All functions take h5_lock(); callers on several threads are serialised.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ckpt/base/status.h"
#include "ckpt/format/tree.h"

namespace ckpt::h5 {

struct DatasetExtent {
  std::string path;  // "/model/fc1.weight"
  const Tensor* tensor = nullptr;
  uint64_t offset = 0;  // 0 when the tensor has no bytes
};

// Tensors' xxh3 must already be set (it is written as an attribute). Aliased tensors are written as
// empty datasets with an `alias_of` attribute and are not in the returned extents.
// What ckpt's encoder wrote: these runs of bytes, every other byte of the file zero (a hole
// until the tensors are written). Empty `runs` when HDF5's writer wrote the file.
struct StructureImage {
  std::vector<std::pair<uint64_t, std::string>> runs;  // (offset, bytes), by offset
  uint64_t file_bytes = 0;
  // The file at `path` existed with exactly file_bytes and was kept, not truncated
  // (write_structure's `reuse`): every byte the runs do not cover still holds its old value,
  // and the caller must write all of them (tensors and the zeros between).
  bool reused = false;
};

// ckpt's own encoder (encode.h) writes the trees it can describe, HDF5's writer the others;
// write_structure_hdf5 always uses HDF5's (tests compare the two). `image` (optional) gets what
// the encoder wrote, so the caller need not read it back. `reuse` (with `image`): an existing
// file at `path` of exactly the encoded size is overwritten in place instead of truncated
// (image->reused; ckpt/store's spare rank files, run_dir.h).
Result<std::vector<DatasetExtent>> write_structure(const std::string& path, const Node& root,
                                                   StructureImage* image = nullptr,
                                                   bool reuse = false);
Result<std::vector<DatasetExtent>> write_structure_hdf5(const std::string& path, const Node& root);

struct DatasetInfo {
  std::string path;
  DType dtype = DType::kFloat32;
  std::vector<int64_t> shape;
  uint64_t offset = 0;  // HDF5's own idea of where the data is (0 when unallocated/empty)
  uint64_t nbytes = 0;
  uint64_t xxh3 = 0;
  std::string alias_of;
  std::optional<BoxOf> box;  // a piece of a global tensor (format version 2)
};

// Datasets whose description the caller already holds and trusts, by path ("/model/fc1.weight"):
// their links are listed but not opened; the tree and `datasets` get the given dtype, shape,
// xxh3, offset and nbytes. Opening a dataset and reading its attributes is most of the cost of
// read_structure (16 ms for 320 datasets against 3 ms without, docs/resume.md).
using TrustedDatasets = std::map<std::string, DatasetInfo>;

// On success the tree holds every group and attribute; each Tensor has dtype, shape, xxh3 and
// alias_of but data == nullptr. `datasets` (optional) receives every dataset in path order.
// `trusted` (optional): see TrustedDatasets; a link it names is taken to be that dataset.
Result<Node> read_structure(const std::string& path, std::vector<DatasetInfo>* datasets,
                            const TrustedDatasets* trusted = nullptr);

}  // namespace ckpt::h5
