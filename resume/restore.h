// resume::restore_rank — the fast CPU restore path of one rank file, the same result as
// ckpt::store::read_rank (docs/format.md §3–4) at the speed of the storage.
//
// It reads the manifest once, checks the HDF5 structure against it (attributes and the tree come
// from HDF5; tensor bytes never do), plans offset-sorted coalesced reads (resume/read_plan.h) and
// runs them on several I/O threads (resume/pipeline.h), hashing each tensor while its bytes are in
// cache. Tensors with a destination are read in place into that caller memory; the others get
// memory the returned tree owns (Tensor::keepalive). The caller owns destination memory and must
// keep it alive and untouched until the call returns. One call uses its own threads; concurrent
// calls on different files are safe (HDF5 access is serialised inside ckpt/h5).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <set>
#include <string>

#include "ckpt/base/status.h"
#include "ckpt/format/tree.h"
#include "ckpt/io/env.h"

namespace ckpt::resume {

// Caller memory for one tensor: exactly the tensor's byte size.
struct HostSpan {
  void* data = nullptr;
  size_t nbytes = 0;
};

struct RestoreOptions {
  // Top-level components whose tensor bytes to read ("model", "optimizer", ...); empty = all.
  // Tensors of other components are in the tree with dtype and shape but no bytes.
  std::set<std::string> components;
  // Tensor path ("/model/fc1.weight") → where its bytes go. A path the file does not have, one
  // outside `components`, or a span of the wrong size is an error before any byte is read.
  std::map<std::string, HostSpan> destinations;
  unsigned io_threads = 0;          // 0 = default_io_threads()
  uint64_t chunk_bytes = 1u << 20;  // largest single read; L2-sized so the hash reads cache
  uint64_t max_gap = 64u << 10;     // padding read to coalesce neighbouring tensors
  bool verify_hashes = true;
};

struct RestoreStats {
  uint64_t tensor_bytes = 0;  // bytes of the tensors restored
  uint64_t read_bytes = 0;    // bytes read (padding between coalesced tensors included)
  size_t tensors = 0;
  size_t placed = 0;  // restored into a destination
  uint64_t chunks = 0;
  unsigned threads = 0;
  double metadata_seconds = 0;  // manifest, HDF5 structure, checks, plan
  double data_seconds = 0;      // the read/hash pipeline
};

// On success the tree holds every group and attribute, and the bytes of every tensor of the
// requested components, each hash verified; aliases share their target's bytes. On failure a
// Status naming the file and, where there is one, the tensor:
//   corrupt: tensor "/model/x" in DIR/rank-00000.h5: xxh3 mismatch at offset 0x2000 (…)
// Never throws.
Result<Node> restore_rank(Env* env, const std::string& step_dir, int64_t rank,
                          const RestoreOptions& options = {}, RestoreStats* stats = nullptr);

}  // namespace ckpt::resume
