// ReadPlan: which byte ranges of a rank file the fast restore path reads, in what order, and where
// each byte goes. Pure: built from manifest entries, no I/O, so it is tested exhaustively in
// memory.
//
// Tensors are sorted by file offset. Neighbouring extents (4 KiB-aligned, so separated by at most
// a little padding) are coalesced into one chunk while the gap stays ≤ max_gap and the chunk
// ≤ coalesce_bytes (≤ chunk_bytes); a tensor larger than chunk_bytes is split into several
// chunks of its own. A tensor that would take a coalesced chunk past coalesce_bytes starts a new
// one, so a tensor of more than coalesce_bytes always reads alone, straight into its
// destination: only small tensors go through a staging buffer, one that stays cache-sized while
// single reads of large tensors may be larger. Each
// chunk lists its pieces (tensor, offset inside the tensor, offset inside the chunk, length).
// Chunks are grouped into units: a unit never shares a tensor with another unit, so the one worker
// that owns a unit sees every piece of its tensors in order and can stream each tensor's XXH3
// without locks. Zero-byte tensors have no chunk; their hash is checked without I/O.
// cover_file() adds filler chunks (no pieces) over every byte no chunk reads — HDF5 metadata,
// padding, tensors left out — so the chunks tile the whole file and the pipeline can stream the
// file's XXH3 from the same reads.
// A plan is an immutable value after make_read_plan; any number of threads may read it.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "ckpt/format/manifest.h"

namespace ckpt::resume {

struct PlanTensor {
  std::string path;
  uint64_t offset = 0;  // in the file
  uint64_t nbytes = 0;
  uint64_t xxh3 = 0;  // expected
  size_t manifest_index = 0;
  // The entry's chunk digests (ManifestEntry::chunk_xxh3), checked as well when not empty.
  uint64_t chunk_bytes = 0;
  std::vector<uint64_t> chunk_xxh3;
};

struct PlanPiece {
  uint32_t tensor = 0;         // index into ReadPlan::tensors
  uint64_t tensor_offset = 0;  // where the piece starts inside the tensor
  uint64_t chunk_offset = 0;   // where the piece starts inside the chunk
  uint64_t nbytes = 0;
};

struct PlanChunk {
  uint64_t offset = 0;  // in the file
  uint64_t nbytes = 0;  // bytes read, padding between coalesced tensors included
  uint32_t first_piece = 0;
  uint32_t piece_count = 0;
};

struct PlanUnit {
  uint32_t first_chunk = 0;
  uint32_t chunk_count = 0;
};

struct PlanOptions {
  uint64_t chunk_bytes = 1u << 20;  // largest read
  uint64_t max_gap = 64u << 10;     // padding worth reading to save a syscall
  // Largest chunk of more than one tensor (the size of a staging buffer); 0 or more than
  // chunk_bytes = chunk_bytes.
  uint64_t coalesce_bytes = 0;
};

struct ReadPlan {
  std::vector<PlanTensor> tensors;  // offset order; zero-byte tensors included
  std::vector<PlanChunk> chunks;    // offset order
  std::vector<PlanPiece> pieces;    // chunk order, then offset order
  std::vector<PlanUnit> units;      // offset order
  uint64_t tensor_bytes = 0;        // sum of tensor sizes
  uint64_t read_bytes = 0;          // sum of chunk sizes (tensor bytes + coalesced padding)
  uint64_t chunk_bytes = 0;         // the largest chunk size the plan may contain
  uint64_t file_bytes = 0;          // set by cover_file(): the chunks tile [0, file_bytes)

  // True when the chunk is exactly one whole-chunk piece, so it can be read straight into the
  // tensor's destination with no staging copy.
  bool is_direct(const PlanChunk& c) const {
    return c.piece_count == 1 && pieces[c.first_piece].nbytes == c.nbytes;
  }
};

// `entries` are the tensors to read (any order; from one manifest, so they do not overlap).
// On failure (chunk_bytes == 0, or more than 2^32 pieces) an kInvalidArgument Status.
Result<ReadPlan> make_read_plan(const std::vector<ManifestEntry>& entries,
                                const PlanOptions& options = {});

// Adds filler chunks (each its own unit, at most chunk_bytes) over the holes of `plan`, so its
// chunks tile [0, file_bytes) in offset order. On failure (a chunk ends past file_bytes) a
// kCorrupt Status naming `file`; the plan is then unchanged.
Status cover_file(ReadPlan* plan, uint64_t file_bytes, const std::string& file);

// Overload that keeps manifest indices: entries[i] is manifest.tensors[indices[i]].
Result<ReadPlan> make_read_plan(const Manifest& manifest, const std::vector<size_t>& indices,
                                const PlanOptions& options = {});

// The [begin, end) byte ranges of the file that `plan`'s chunks read, in chunk order (what a
// ReadCache::keep_only keeps for a read of that plan).
std::vector<std::pair<uint64_t, uint64_t>> chunk_ranges(const ReadPlan& plan);

}  // namespace ckpt::resume
