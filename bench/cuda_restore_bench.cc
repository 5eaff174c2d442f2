// GPU restore benchmark: resume::cuda::DeviceRestorer against B = min(storage read, pinned
// host-to-device copy), both peers measured in the same run on the same bytes (DESIGN.md target:
// ≥ 0.85 × B). Storage read = raw multi-threaded pread of every tensor into pre-touched host
// memory; H2D = cudaMemcpyAsync from one pinned buffer, the copy engine's rate. WARM = file in the
// page cache; COLD = page cache dropped before every run (residency printed). Prints MB/s and
// ratios; no assertions. Without a GPU it says so in one line and exits 0.
// Usage: cuda_restore_bench [--mb 2048] [--tensor-mb 64] [--small 256] [--reps 5] [--cold-reps 3]
//                           [--threads N] [--chunk-mb 8] [--buffers N] [--dir DIR]
#include <cuda_runtime_api.h>

#include <cstring>

#include "bench/bench_state.h"
#include "bench/bench_util.h"
#include "ckpt/store/rank_io.h"
#include "resume/cuda/cuda_status.h"
#include "resume/cuda/device_restore.h"
#include "resume/pipeline.h"

namespace ckpt::bench {
namespace {

constexpr char kUsage[] =
    "usage: cuda_restore_bench [--mb 2048] [--tensor-mb 64] [--small 256] [--reps 5] "
    "[--cold-reps 3] [--threads N] [--chunk-mb 8] [--buffers N] [--dir DIR]";

struct Args : BenchFlags {
  uint64_t chunk_mb = 8, buffers = 0;
  Args() {
    mb = 2048;
    tensor_mb = 64;
  }
};

bool cuda_ok(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return true;
  std::fprintf(stderr, "cuda_restore_bench: %s: %s\n", what, cudaGetErrorString(e));
  return false;
}

// Copy-engine rate from pinned memory: `total` bytes in chunk-sized copies on one stream.
double pinned_h2d(uint64_t total, size_t chunk, void* dev) {
  void* host = nullptr;
  if (!cuda_ok(cudaHostAlloc(&host, chunk, cudaHostAllocPortable), "cudaHostAlloc")) return -1;
  std::memset(host, 1, chunk);
  cudaStream_t st;
  cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking);
  const auto t0 = Clock::now();
  for (uint64_t done = 0; done < total; done += chunk) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(chunk, total - done));
    cudaMemcpyAsync(static_cast<unsigned char*>(dev) + done, host, n, cudaMemcpyHostToDevice, st);
  }
  const bool ok = cuda_ok(cudaStreamSynchronize(st), "cudaStreamSynchronize");
  const double t = seconds_since(t0);
  cudaStreamDestroy(st);
  cudaFreeHost(host);
  return ok ? t : -1;
}

int run(const Args& a) {
  std::string why;
  if (!resume::cuda::gpu_path_available(&why)) {
    std::printf(
        "cuda_restore_bench: %s; nothing to measure here (the CPU path: "
        "save_restore_bench)\n",
        why.c_str());
    return 0;
  }
  Env* env = Env::posix();
  const std::string base = work_dir(a.dir, "ckpt-cuda-bench");
  if (base.empty()) return 1;
  const unsigned threads = a.threads ? a.threads : resume::default_io_threads();
  State s;
  build_state(a.mb, a.tensor_mb, a.small, &s);
  const std::string step_dir = path_join(base, "step");
  if (!env->make_dirs(step_dir).is_ok()) return 1;
  auto m = store::write_rank(env, step_dir, 0, 1, 1, &s.root);
  if (!m.is_ok()) {
    std::fprintf(stderr, "%s\n", m.status().to_string().c_str());
    return 1;
  }
  s.storage.clear();  // the source bytes are on disk now; keep host memory for the peers
  const std::string file = path_join(step_dir, m->file);
  const uint64_t tb = s.bytes;
  cudaDeviceProp prop{};
  cudaGetDeviceProperties(&prop, 0);
  std::printf("cuda_restore_bench: %s, %zu tensors, %.1f MB, %u I/O threads, %llu MiB chunks\n",
              prop.name, m->tensors.size(), tb / 1e6, threads,
              static_cast<unsigned long long>(a.chunk_mb));
  std::printf("load average at start: %s\n", load_average().c_str());

  // Device destinations: one allocation, carved per tensor (256-byte aligned).
  std::vector<uint64_t> at;
  uint64_t dev_bytes = 0;
  for (const auto& e : m->tensors) {
    at.push_back(dev_bytes);
    dev_bytes += (e.nbytes + 255) / 256 * 256;
  }
  void* dev = nullptr;
  if (!cuda_ok(cudaMalloc(&dev, std::max<uint64_t>(dev_bytes, tb)), "cudaMalloc")) return 1;
  std::map<std::string, resume::cuda::DeviceSpan> spans;
  for (size_t i = 0; i < m->tensors.size(); ++i) {
    spans[m->tensors[i].path] = {static_cast<unsigned char*>(dev) + at[i], m->tensors[i].nbytes};
  }
  const HostDestinations host(*m);

  resume::cuda::DeviceRestorerOptions o;
  o.io_threads = threads;
  o.chunk_bytes = a.chunk_mb << 20;
  o.ring_buffers = a.buffers;
  const auto tr = Clock::now();
  auto restorer = resume::cuda::DeviceRestorer::create(o);
  const double ring_s = seconds_since(tr);
  if (!restorer.is_ok()) {
    std::fprintf(stderr, "%s\n", restorer.status().to_string().c_str());
    return 1;
  }
  std::printf("pinned ring: %zu x %llu MiB allocated in %.3f s (once, outside the timings)\n",
              o.ring_buffers ? o.ring_buffers : 2 * size_t{threads},
              static_cast<unsigned long long>(a.chunk_mb), ring_s);

  auto gpu = [&]() -> double {
    const auto t0 = Clock::now();
    auto st = (*restorer)->restore(env, step_dir, 0, spans);
    if (!st.is_ok()) {
      std::fprintf(stderr, "%s\n", st.status().to_string().c_str());
      return -1;
    }
    return seconds_since(t0);
  };
  for (int cold = 0; cold < 2; ++cold) {
    const uint64_t reps = cold ? a.cold_reps : a.reps;
    if (reps == 0) continue;
    std::vector<double> t_read, t_h2d, t_gpu;
    ColdCache dropped;
    if (!cold) make_warm({file});
    for (uint64_t r = 0; r < reps; ++r) {
      if (cold) dropped.drop({file});
      t_read.push_back(raw_read(file, *m, host.ptrs, threads));
      t_h2d.push_back(pinned_h2d(tb, o.chunk_bytes, dev));
      if (cold) make_cold({file});
      t_gpu.push_back(gpu());
      if (t_read.back() < 0 || t_h2d.back() < 0 || t_gpu.back() < 0) return 1;
    }
    const double read_mbs = mb_per_s(tb, median(t_read));
    const double h2d_mbs = mb_per_s(tb, median(t_h2d));
    const double b = std::min(read_mbs, h2d_mbs);
    if (cold) {
      std::printf("\nCOLD (page cache dropped with %s; at most %.1f%% resident at start)\n",
                  dropped.how.c_str(), 100 * dropped.resident_max);
    } else {
      std::printf("\nWARM (file in the page cache)\n");
    }
    const RowPrinter out{46, "B", tb};
    out.row("storage read: raw pread, I/O threads", t_read);
    out.row("pinned H2D: cudaMemcpyAsync, copy engine", t_h2d);
    std::printf("  B = min(read, H2D) = %.0f MB/s\n", b);
    out.row("DeviceRestorer (read + hash + H2D)", t_gpu, b);
  }
  std::printf("\nload average at end: %s   (target: GPU path >= 0.85x B)\n",
              load_average().c_str());
  cudaFree(dev);
  if (a.dir.empty()) (void)env->remove_tree(base);
  return 0;
}

}  // namespace
}  // namespace ckpt::bench

int main(int argc, char** argv) {
  namespace b = ckpt::bench;
  b::Args a;
  b::FlagParser flags;
  flags.bench_flags(&a, true).number("--chunk-mb", &a.chunk_mb, true);
  flags.number("--buffers", &a.buffers);
  return b::parse_or_usage(flags, argc, argv, b::kUsage) ? b::run(a) : 64;
}
