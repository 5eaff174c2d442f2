#include "resume/cuda/load_all_device.h"

#include <cuda_runtime_api.h>

#include <chrono>
#include <map>

#include "ckpt/store/rank_io.h"
#include "ckpt/store/run_dir.h"
#include "resume/cuda/device_restore.h"

namespace ckpt::resume::cuda {
namespace {

// Device buffers for one rank's tensors, freed on every path.
struct DeviceBuffers {
  std::map<std::string, DeviceSpan> spans;
  ~DeviceBuffers() {
    for (auto& [path, s] : spans) cudaFree(s.data);
  }
};

}  // namespace

Result<LoadAllStats> load_all_device(Env* env, const std::string& step_dir, int device,
                                     const LoadAllOptions& options) {
  std::string why;
  if (!gpu_path_available(&why)) return unsupported(why);
  CKPT_ASSIGN_OR_RETURN(CommitRecord commit, store::read_commit(env, step_dir));
  DeviceRestorerOptions ro;
  ro.device = device;
  ro.io_threads = options.io_threads;
  CKPT_ASSIGN_OR_RETURN(auto restorer, DeviceRestorer::create(ro));
  if (cudaSetDevice(device) != cudaSuccess) {
    return unsupported("cuda:" + std::to_string(device) + ": no such device");
  }
  LoadAllStats out;
  out.ranks = commit.world_size;
  out.threads = restorer->options().io_threads;
  for (int64_t rank = 0; rank < commit.world_size; ++rank) {
    CKPT_ASSIGN_OR_RETURN(Manifest m, store::read_manifest(env, step_dir, rank));
    DeviceBuffers buffers;
    const auto ta = std::chrono::steady_clock::now();
    for (const ManifestEntry& e : m.tensors) {
      if (e.nbytes == 0) continue;
      void* p = nullptr;
      if (cudaMalloc(&p, e.nbytes) != cudaSuccess) {
        return io_error("cuda:" + std::to_string(device) + ": cannot allocate " +
                        std::to_string(e.nbytes) + " bytes for " + e.path);
      }
      buffers.spans[e.path] = DeviceSpan{p, e.nbytes};
    }
    out.alloc_seconds +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - ta).count();
    const auto t0 = std::chrono::steady_clock::now();
    CKPT_ASSIGN_OR_RETURN(
        DeviceRestoreStats stats,
        restorer->restore(env, step_dir, rank, buffers.spans, options.verify_hashes));
    out.seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    out.bytes += stats.tensor_bytes;
    out.tensors += stats.tensors;
    if (stats.threads > out.threads) out.threads = stats.threads;
  }
  return out;
}

}  // namespace ckpt::resume::cuda
