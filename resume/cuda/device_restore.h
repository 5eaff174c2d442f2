// DeviceRestorer: the GPU restore path. Tensor bytes go file → pinned staging buffer (several I/O
// threads, resume/pipeline.h) → device memory (cudaMemcpyAsync on one stream per I/O thread), and
// each chunk is hashed on the host while it is hot and while its DMA runs.
//
// The restorer owns a PinnedRing and the streams; create it once (pinning is slow) and reuse it
// for every rank and every restore. Destinations are raw device pointers owned by the caller (the
// libtorch glue maps parameters to pointers; this header includes neither torch nor CUDA). Only
// tensors with a destination are read, from the manifest alone: attributes and host-side
// components come from resume::restore_rank. The host hash covers what was read; the copy engine
// is trusted to land it. One restore at a time per restorer (restore() is not reentrant);
// distinct restorers may run concurrently. No exception escapes; CUDA errors are Status.
// Without a usable GPU create() returns kUnsupported with one line that says so; callers then use
// the CPU path.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "ckpt/base/status.h"
#include "ckpt/io/env.h"

namespace ckpt::resume::cuda {

// Device memory for one tensor: exactly the tensor's byte size, on the restorer's device.
struct DeviceSpan {
  void* data = nullptr;
  size_t nbytes = 0;
};

struct DeviceRestorerOptions {
  int device = 0;
  unsigned io_threads = 0;          // 0 = default_io_threads()
  size_t ring_buffers = 0;          // 0 = 2 per I/O thread (one filling, one copying)
  uint64_t chunk_bytes = 8u << 20;  // staging buffer size = largest read
  uint64_t max_gap = 64u << 10;
};

struct DeviceRestoreStats {
  uint64_t tensor_bytes = 0;
  uint64_t read_bytes = 0;
  size_t tensors = 0;
  uint64_t chunks = 0;
  unsigned threads = 0;
  double seconds = 0;  // manifest to the last copy completed
};

// One line: whether the GPU path can run here, and why not.
bool gpu_path_available(std::string* why);

class DeviceRestorer {
 public:
  static Result<std::unique_ptr<DeviceRestorer>> create(const DeviceRestorerOptions& options);
  ~DeviceRestorer();
  DeviceRestorer(const DeviceRestorer&) = delete;
  DeviceRestorer& operator=(const DeviceRestorer&) = delete;

  // Restores every tensor named in `destinations` from rank `rank` of `step_dir`. On success each
  // destination holds its tensor's bytes (hash verified when `verify_hashes`) and every copy has
  // completed. On failure the first error, naming the file and tensor; destinations may then
  // hold partial data. A path the file lacks, a span of the wrong size, or a pointer that is not
  // device memory of this device is refused before any byte moves.
  Result<DeviceRestoreStats> restore(Env* env, const std::string& step_dir, int64_t rank,
                                     const std::map<std::string, DeviceSpan>& destinations,
                                     bool verify_hashes = true);

  const DeviceRestorerOptions& options() const { return options_; }

 private:
  struct Impl;
  explicit DeviceRestorer(const DeviceRestorerOptions& options);
  DeviceRestorerOptions options_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ckpt::resume::cuda
