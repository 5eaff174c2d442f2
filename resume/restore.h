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
//
// All or nothing, two ways (docs/resume.md): with RestoreOptions::check_first every hash is
// checked in a first read that writes no caller memory, then a second read fills the destinations
// (what the Checkpointer uses); with RestoreOptions::undo the old bytes of every destination are
// saved just before the pipeline overwrites them (snapshot and roll back; memory the tree owns is
// staging and needs none). A failed restore_rank puts them back itself, so caller memory is
// bitwise as it was; after a successful one the caller may still apply() the Undo when a later
// step of its own restore fails, or drop it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "ckpt/base/status.h"
#include "ckpt/format/component.h"
#include "ckpt/format/tree.h"
#include "ckpt/io/env.h"
#include "ckpt/store/rank_io.h"

namespace ckpt::resume {

// Caller memory for one tensor: exactly the tensor's byte size. `fresh` memory holds nothing live
// (allocated for this restore: a fresh optimizer's moments), so a check-first restore reads it
// once, hashed as its bytes land, in the first read; only the others wait for the check.
struct HostSpan {
  void* data = nullptr;
  size_t nbytes = 0;
  bool fresh = false;
};

// The bytes a restore overwrote in caller memory, as they were before. Not thread-safe.
class Undo {
 public:
  struct Range {
    void* dst = nullptr;                   // caller memory that was overwritten
    const unsigned char* saved = nullptr;  // its old bytes, inside the Undo's own buffer
    size_t nbytes = 0;
  };
  // Takes the saved bytes (replacing what was held); `saved` owns the memory the ranges point to.
  void hold(std::shared_ptr<void> saved, std::vector<Range> ranges);
  // Writes every saved range back, then holds nothing.
  void apply();
  void clear();
  uint64_t bytes() const;

 private:
  std::shared_ptr<void> saved_;
  std::vector<Range> ranges_;
};

// Top-level groups of a rank file by name: the Python Checkpointer writes one per tracked
// keyword ("model", "opt", "scale", ...), which the closed Component set does not cover. C++
// callers name the format's groups by Component (RestoreOptions::components).
using GroupNames = std::set<std::string>;

struct RestoreOptions {
  // Top-level components whose tensor bytes to read; with `groups` empty too, every group.
  // Tensors of the other groups are in the tree with dtype and shape but no bytes.
  std::set<Component> components;
  // Groups to read by name besides `components` (a Python-written file's free-named groups).
  GroupNames groups;
  // Tensor path ("/model/fc1.weight") → where its bytes go. A path the file does not have, one
  // outside the requested groups, or a span of the wrong size is an error before any byte is read.
  std::map<std::string, HostSpan> destinations;
  unsigned io_threads = 0;  // 0 = io_threads_for(file, 0): more for a remote store
  // Largest read that is hashed, and largest read of several small tensors (through a staging
  // buffer); L2-sized so the hash and the copy out read cache.
  uint64_t chunk_bytes = 1u << 20;
  uint64_t max_gap = 64u << 10;  // padding read to coalesce neighbouring tensors
  bool verify_hashes = true;
  // Also check the XXH3-64 of the whole file against the commit record's (CommitFile bytes and
  // xxh3), streamed from the same reads: every byte of the file is read once, those of tensors
  // outside `components` and of the HDF5 metadata included. Needs verify_hashes.
  bool check_file_hash = false;
  uint64_t file_bytes = 0;
  uint64_t file_xxh3 = 0;
  // With check_file_hash, the commit record's region digest when it has one (CommitFile::
  // regions_xxh3, ckpt/format/regions.h): the whole file is then checked from the tensors' own
  // hashes plus a hash of the bytes between them, read before any tensor — no second, sequential
  // pass over the tensor bytes. Every tensor of the file is read and hashed (those outside
  // `components` into staging only). Without it, the whole-file XXH3 is streamed as above.
  std::optional<uint64_t> file_regions_xxh3;
  // Where to save the old bytes of the destinations (see the note at the top); null = none saved.
  Undo* undo = nullptr;
  // Check first, then write (docs/resume.md): with verify_hashes, a first read checks every hash
  // (each tensor's and, with check_file_hash, the whole file's) and writes no caller memory but
  // fresh destinations (HostSpan::fresh) — tensors without a destination do land in memory the
  // tree owns — then `before_in_place` runs, and only then a second, unhashed read fills the
  // other destinations (from the page cache when the file fits in memory; over a remote file from
  // a ReadCache that kept only what that read needs). A hash that fails leaves every destination
  // but the fresh ones untouched with no snapshot.
  // If the file changes between the reads (RandomAccessFile::version()), the restore fails naming
  // it; the destinations are then partly written unless `undo` is set as well.
  bool check_first = false;
  // With check_first: runs after the first read on the tree (aliases linked; the bytes of every
  // tensor without a destination, or with a fresh one, present), before any other destination is
  // written. An error stops the restore with caller memory untouched (but the fresh).
  std::function<Status(Node*)> before_in_place;
  // Largest read of a read that hashes nothing: check_first's second read, or every read with
  // verify_hashes off (no hash to keep in cache, so fewer, larger reads). Small tensors still
  // share reads of at most chunk_bytes; a larger tensor reads alone, straight into place.
  uint64_t unhashed_chunk_bytes = 8u << 20;
};

struct RestoreStats {
  uint64_t tensor_bytes = 0;  // bytes of the tensors restored
  uint64_t read_bytes = 0;    // bytes read (padding between coalesced tensors included)
  size_t tensors = 0;
  size_t placed = 0;  // restored into a destination
  uint64_t chunks = 0;
  uint64_t scattered = 0;        // reads of several small tensors straight into their destinations
  uint64_t hashed_in_cache = 0;  // check_first: bytes hashed in the page cache, not read (mapped)
  unsigned threads = 0;
  double metadata_seconds = 0;  // manifest, HDF5 structure, checks, plan
  double data_seconds = 0;      // the read/hash pipeline (both reads with check_first)
  double check_seconds = 0;     // check_first's first read, part of data_seconds
  uint64_t cached_bytes = 0;    // over a remote file: what check_first kept for its second read
};

// Sets check_file_hash and the commit record's size, whole-file hash and region digest of the
// file being restored (store::listed_rank_file), so that every byte of it is checked.
void check_whole_file(const CommitFile& listed, RestoreOptions* options);

// On success the tree holds every group and attribute, and the bytes of every tensor of the
// requested components, each hash verified; aliases share their target's bytes. On failure a
// Status naming the file and, where there is one, the tensor:
//   corrupt: tensor "/model/x" in DIR/rank-00000.h5: xxh3 mismatch at offset 0x2000 (…)
// Never throws.
Result<Node> restore_rank(Env* env, const std::string& step_dir, int64_t rank,
                          const RestoreOptions& options = {}, RestoreStats* stats = nullptr);

// The same, from a structure the caller opened (store::open_rank_structure) to plan its
// destinations from dtypes and shapes before any byte is read.
Result<Node> restore_rank(Env* env, store::RankStructure structure, const RestoreOptions& options,
                          RestoreStats* stats = nullptr);

}  // namespace ckpt::resume
