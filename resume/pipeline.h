// The restore pipeline's engine: I/O threads execute a ReadPlan against one file, hash every tensor
// while its bytes are hot in cache, and hand each chunk to a ChunkSink that puts the bytes where
// they belong (host memory for the CPU path, a pinned ring and a CUDA stream for resume/cuda).
//
// Protocol, per worker thread:
//   1. take the next unit of the plan (an atomic counter: units go out in file-offset order, so
//      the storage sees a near-sequential stream even with several readers);
//   2. for each chunk of the unit, in order: sink.acquire() gives host memory to read into;
//      read_visiting() fills it and shows each part as it lands to the worker, which feeds it to
//      its tensor's streaming XXH3 while it is in cache (an 8 MiB chunk hashed after it is whole
//      comes back from memory: 0.13 s of CPU per GiB here against 0.075 s); sink.deliver() moves
//      the bytes to their destinations; sink.release() hands the memory back. A sink whose
//      deliver() starts asynchronous work for the hash to overlap (overlaps_hashing(): a device
//      copy) gets read_at(), deliver(), then the hash of each piece, the chunk still in cache;
//      so does a read with a file hash to stream (step 4). Without a file hash to stream, a chunk
//      of several pieces that sink.scatter() accepts is instead read with one read_scatter_at()
//      straight into the pieces' destinations (no staging copy) and each piece hashed there,
//      still in cache. A chunk the sink only hashes (ChunkSink::hash_only)
//      is hashed where the file holds it when the file can show it (visit_at), with no read.
//      Without hashes, what goes straight into place is read with read_scatter_streaming (the
//      caller reads those bytes no more: non-temporal stores where the file copies them);
//   3. when a tensor's last piece has been hashed, its digest is compared with the manifest's.
//   4. with a file hash to check (the plan covers the whole file, read_plan.h cover_file()), the
//      worker then hands the chunk to the file hash, which consumes chunks strictly in file
//      order: a chunk whose bytes stay put until the run ends (ChunkSink::bytes_stay) is left
//      for whoever reaches it; any other chunk's worker waits for its turn and hashes it before
//      release(). Units go out in offset order, so the wait is for at most the chunks the other
//      workers hold.
// A unit never shares a tensor with another unit, so each tensor is hashed by one thread, in
// order, with no locks. The first error stops every worker after its current chunk; that error is
// returned. ChunkSink methods are called concurrently from different workers (never for the same
// worker at once); implementations synchronise their shared state.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ckpt/base/status.h"
#include "ckpt/io/env.h"
#include "resume/read_plan.h"

namespace ckpt::resume {

class ChunkSink {
 public:
  virtual ~ChunkSink() = default;
  // Host memory of at least chunk.nbytes for `worker` to read `chunk` into. May block (ring full).
  virtual Result<unsigned char*> acquire(unsigned worker, const PlanChunk& chunk) = 0;
  // `bytes` holds the chunk as read. Called before the chunk is hashed when overlaps_hashing(),
  // so asynchronous copies overlap the hashing; else after (its parts were hashed as they
  // landed).
  virtual Status deliver(unsigned worker, const PlanChunk& chunk, unsigned char* bytes) = 0;
  // The worker is done with `bytes` (hashed). Called exactly once per successful acquire().
  virtual Status release(unsigned worker, const PlanChunk& chunk, unsigned char* bytes) = 0;
  // After every worker has stopped: wait for outstanding asynchronous work. Called once.
  virtual Status finish() { return Status::ok(); }
  // True when deliver() starts asynchronous work (a device copy) that the hashing should
  // overlap: the pipeline then hashes a chunk after deliver(), not as its parts land.
  virtual bool overlaps_hashing() const { return false; }
  // True when `bytes` (from acquire) keep the chunk's bytes unchanged until run_pipeline returns
  // (read straight into their destination), so the file hash may read them later.
  virtual bool bytes_stay(const PlanChunk&) const { return false; }
  // True when no byte of `chunk` goes anywhere (every piece is only hashed: the checking read of
  // a check-first restore). Without a file hash to stream, the pipeline then hashes the bytes
  // where the file already holds them (RandomAccessFile::visit_at: cached pages of a local
  // file), and reads them through acquire() only where it cannot.
  virtual bool hash_only(const PlanChunk&) const { return false; }
  // Optional, instead of acquire/deliver/release for a chunk of several pieces: true with
  // `spans` tiling the chunk in file order (each piece's bytes into its destination, the padding
  // between them into scratch memory of the worker's) and `piece_bytes[k]` where the chunk's k-th
  // piece lands, which stays put until the chunk is hashed. False: read it through acquire().
  virtual bool scatter(unsigned /*worker*/, const PlanChunk& /*chunk*/,
                       std::vector<ReadSpan>* /*spans*/,
                       std::vector<const unsigned char*>* /*piece_bytes*/) {
    return false;
  }
};

struct PipelineOptions {
  unsigned io_threads = 4;    // workers; capped by the number of units
  bool verify_hashes = true;  // compare each tensor's XXH3 with the plan's
  // With verify_hashes and a plan that covers the whole file: compare the XXH3-64 of the whole
  // file (streamed from the chunks as they are read) with this value, the commit record's.
  bool check_file_hash = false;
  uint64_t file_xxh3 = 0;
};

struct PipelineStats {
  uint64_t read_bytes = 0;  // bytes read from the file (padding included)
  uint64_t chunks = 0;
  uint64_t scattered = 0;        // chunks read straight into several destinations (sink.scatter)
  uint64_t hashed_in_cache = 0;  // bytes hashed where the file holds them (sink.hash_only)
  unsigned threads = 0;
};

// Runs `plan` against `file`. On success every tensor of the plan has been delivered to the sink
// and (with verify_hashes) matched its hash. On failure the first error: a hash mismatch is
//   corrupt: tensor "/model/x" in FILE: xxh3 mismatch at offset 0x2000 (expected …, got …)
// a whole-file mismatch (every tensor matched its own hash) is
//   corrupt: FILE: whole-file xxh3 mismatch (commit record: expected …, got …) …
// and read errors name the file (a short file is kCorrupt "truncated"). Never throws.
Status run_pipeline(const RandomAccessFile& file, const ReadPlan& plan, ChunkSink* sink,
                    const PipelineOptions& options, PipelineStats* stats = nullptr);

// The mismatch message above; shared with the paths that check hashes outside the pipeline.
Status hash_mismatch(const std::string& tensor, const std::string& file, uint64_t offset,
                     uint64_t expected, uint64_t got);

// Workers to use by default: the machine's cores, at least 2 (reads overlap hashing), at most 16.
unsigned default_io_threads();

// Workers for a read of `file`: `requested` when nonzero; else default_io_threads(), or the
// reads in flight the file's storage asks for (ReadProfile::parallel_reads) when that is more —
// threads waiting on a remote store's round trips cost no CPU.
unsigned io_threads_for(const RandomAccessFile& file, unsigned requested);

}  // namespace ckpt::resume
