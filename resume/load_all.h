// load_all: every tensor of one committed checkpoint (all its rank files) through the restore
// pipeline into memory, timed in-process — what `ckpt load-bench` measures. Both paths read into
// memory they allocate before the clock runs, as a restore into a live model's tensors finds it
// there: the host path one arena per rank file (populated: every page faulted in, which on a
// virtual machine costs more than the reads — `alloc_seconds`), the device path
// (resume/cuda/load_all_device.h) device buffers. Every byte of each file is verified against
// the commit record (each tensor's hash and the region digest, or the streamed whole-file hash)
// unless verify_hashes is off. Stateless; thread-compatible.
#pragma once

#include <cstdint>
#include <string>

#include "ckpt/base/status.h"
#include "ckpt/io/env.h"

namespace ckpt::resume {

struct LoadAllOptions {
  unsigned io_threads = 0;  // 0 = io_threads_for(file, 0) per rank file
  bool verify_hashes = true;
};

struct LoadAllStats {
  uint64_t bytes = 0;        // tensor bytes loaded
  double seconds = 0;        // wall time of the loads: metadata and data, not alloc_seconds
  double alloc_seconds = 0;  // allocating and faulting in the host memory read into
  unsigned threads = 0;      // I/O threads used
  int64_t ranks = 0;
  uint64_t tensors = 0;
};

// A run directory resolves to its newest committed checkpoint (LATEST), a step directory to
// itself. NotFound when PATH does not exist or the run has no committed checkpoint; Corrupt when a
// directory is neither.
Result<std::string> resolve_checkpoint(Env* env, const std::string& path);

// Loads every rank file of `step_dir` into host memory (and frees it). Errors name the file and
// the tensor (a hash mismatch is Corrupt).
Result<LoadAllStats> load_all_host(Env* env, const std::string& step_dir,
                                   const LoadAllOptions& options);

}  // namespace ckpt::resume
