// Writing and reading one rank's file of a checkpoint (docs/format.md §3–4): the HDF5 file with
// its structure and attributes, the tensor bytes filled in by plain writes, and the manifest.
//
// write_rank (rank_write.cc) hashes every tensor, writes `rank-R.h5` and `rank-R.manifest.json`
// under temporary names, fsyncs and renames them (step 1 of the commit protocol); the whole-file
// XXH3 of rank-R.h5 is computed while its bytes are written and recorded in the manifest
// (`file_xxh3`), so commit() never reads the rank file back. read_rank checks the file
// against its manifest without trusting HDF5 (sizes, extents, offsets, attribute digest), then
// reads each tensor's bytes with one positioned read — into memory the caller places, or into a
// buffer it allocates — and checks its hash. Thread-compatible: distinct ranks may be written by
// distinct threads.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <set>
#include <string>

#include "ckpt/base/status.h"
#include "ckpt/format/manifest.h"
#include "ckpt/format/tree.h"
#include "ckpt/h5/rank_file.h"
#include "ckpt/io/env.h"

namespace ckpt::store {

struct RankWriteStats {
  uint64_t tensor_bytes = 0;
  uint64_t file_bytes = 0;
  size_t tensors = 0;
  // Whole-file XXH3-64 of rank-R.h5 and of rank-R.manifest.json as written: what the commit
  // record lists for them.
  uint64_t file_xxh3 = 0;
  uint64_t manifest_bytes = 0;
  uint64_t manifest_xxh3 = 0;
  // Where the time went: per-tensor hashes, HDF5 structure, the write pass (pwrite + whole-file
  // hash), its fdatasync (with the manifest built, written and synced meanwhile on a file
  // system), and the renames + directory sync (on an object store: the manifest's PUT).
  bool direct_io = false;  // the tensor bodies went to the disk with direct I/O
  double hash_seconds = 0, structure_seconds = 0, write_seconds = 0, sync_seconds = 0,
         manifest_seconds = 0;
};

// `root` holds the components as children; its attrs become the file's root attributes (the
// caller sets step, rank, ...). Tensor hashes are computed and stored into `root`.
// On success both files exist under their final names and are durable.
Result<Manifest> write_rank(Env* env, const std::string& step_dir, int64_t rank, int64_t step,
                            int64_t world_size, Node* root, RankWriteStats* stats = nullptr);

struct ReadOptions {
  // Top-level components to read tensor bytes for; empty = all.
  std::set<std::string> components;
  // Read no tensor bytes at all: the tree, the attributes and every structural check only.
  bool metadata_only = false;
  // Where to put a tensor's bytes: return memory of exactly meta.nbytes, or nullptr to let the
  // reader allocate. Called after dtype and shape are known; it may refuse with a Status.
  std::function<Result<void*>(const std::string& path, const Tensor& meta)> place;
  // Verify each tensor's XXH3 after reading (on by default; the fast path relies on it too).
  bool verify_hashes = true;
};

struct RankReadStats {
  uint64_t tensor_bytes = 0;
  size_t tensors = 0;
  size_t placed = 0;  // read straight into caller memory
};

// On success the tree holds every group and attribute, and the bytes of every tensor of the
// requested components (in place or owned). Errors name the file and the tensor.
Result<Node> read_rank(Env* env, const std::string& step_dir, int64_t rank,
                       const ReadOptions& options = {}, RankReadStats* stats = nullptr);

// Reads and decodes rank R's manifest, checking it against the file's real size. With `opened`,
// on an object store, the rank file is opened for that (one HEAD) and handed over for the reads
// that follow, which then need no HEAD of their own; elsewhere `opened` stays null.
Result<Manifest> read_manifest(Env* env, const std::string& step_dir, int64_t rank,
                               std::shared_ptr<RandomAccessFile>* opened = nullptr);

// One rank file's structure, checked against its manifest without trusting HDF5: every dataset
// listed with the same dtype, shape, hash and data offset, and the attribute digest matching.
// `root` has every group and attribute; its tensors have no bytes yet. The building block of
// read_rank and of the fast path in resume/.
struct RankStructure {
  Manifest manifest;
  std::string file;                          // full path of rank-R.h5
  std::shared_ptr<RandomAccessFile> opened;  // on an object store: the file, opened once
  Node root;
  std::vector<h5::DatasetInfo> datasets;
};

// What open_rank_structure reads of the datasets the manifest lists.
//   kOpenEvery: opens each one and checks its dtype, shape, hash and offset against the manifest.
//   kFromManifest: takes them from the manifest (each link must exist; groups, attributes and
//     aliases still come from HDF5, and the attribute digest is checked). For a reader that
//     then checks the file's bytes against the commit record's whole-file or region hash before
//     it trusts them — which covers every byte of HDF5 metadata, dataset headers included — or
//     one that verifies nothing: the restore path (resume/restore.h). 16 ms → 3 ms for 320
//     datasets (docs/resume.md).
enum class DatasetCheck { kOpenEvery, kFromManifest };
Result<RankStructure> open_rank_structure(Env* env, const std::string& step_dir, int64_t rank,
                                          DatasetCheck check = DatasetCheck::kOpenEvery);

// The tensor at "/a/b/c" inside root, or nullptr.
Tensor* find_tensor(Node* root, const std::string& path);
// "model" for "/model/fc1.weight".
std::string top_component(const std::string& path);
// Points every alias at its target's bytes (after the targets were read).
Status link_aliases(const std::vector<h5::DatasetInfo>& datasets, Node* root,
                    const std::string& fpath);

}  // namespace ckpt::store
