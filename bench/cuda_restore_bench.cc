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

struct Args {
  uint64_t mb = 2048, tensor_mb = 64, small = 256, reps = 5, cold_reps = 3, chunk_mb = 8;
  unsigned threads = 0;
  size_t buffers = 0;
  std::string dir;
};

bool parse(int argc, char** argv, Args* a) {
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i];
    const char* v = argv[i + 1];
    if (k == "--mb")
      a->mb = std::strtoull(v, nullptr, 10);
    else if (k == "--tensor-mb")
      a->tensor_mb = std::strtoull(v, nullptr, 10);
    else if (k == "--small")
      a->small = std::strtoull(v, nullptr, 10);
    else if (k == "--reps")
      a->reps = std::strtoull(v, nullptr, 10);
    else if (k == "--cold-reps")
      a->cold_reps = std::strtoull(v, nullptr, 10);
    else if (k == "--chunk-mb")
      a->chunk_mb = std::strtoull(v, nullptr, 10);
    else if (k == "--threads")
      a->threads = static_cast<unsigned>(std::strtoul(v, nullptr, 10));
    else if (k == "--buffers")
      a->buffers = std::strtoull(v, nullptr, 10);
    else if (k == "--dir")
      a->dir = v;
    else
      return false;
  }
  return argc % 2 == 1 && a->mb > 0 && a->tensor_mb > 0 && a->reps > 0 && a->chunk_mb > 0;
}

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

void line(const char* name, uint64_t bytes, double secs, double peer) {
  const double mbs = mb_per_s(bytes, secs);
  std::printf("  %-46s %8.3f s %9.0f MB/s", name, secs, mbs);
  if (peer > 0) std::printf("   %.2fx B", mbs / peer);
  std::printf("\n");
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
  std::string base = a.dir;
  if (base.empty()) {
    char tmpl[] = "/tmp/ckpt-cuda-bench-XXXXXX";
    if (::mkdtemp(tmpl) == nullptr) return 1;
    base = tmpl;
  }
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
  std::vector<std::unique_ptr<unsigned char[]>> host;
  std::vector<unsigned char*> host_dst;
  for (const auto& e : m->tensors) {
    host.emplace_back(new unsigned char[e.nbytes ? e.nbytes : 1]);
    std::memset(host.back().get(), 0, e.nbytes);
    host_dst.push_back(host.back().get());
  }

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
    double resident = 0;
    std::string how = "warm";
    if (!cold) make_warm({file});
    for (uint64_t r = 0; r < reps; ++r) {
      if (cold) {
        how = make_cold({file});
        resident = std::max(resident, resident_fraction(file));
      }
      t_read.push_back(raw_read(file, *m, host_dst, threads));
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
                  how.c_str(), 100 * resident);
    } else {
      std::printf("\nWARM (file in the page cache)\n");
    }
    line("storage read: raw pread, I/O threads", tb, median(t_read), 0);
    line("pinned H2D: cudaMemcpyAsync, copy engine", tb, median(t_h2d), 0);
    std::printf("  B = min(read, H2D) = %.0f MB/s\n", b);
    line("DeviceRestorer (read + hash + H2D)", tb, median(t_gpu), b);
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
  ckpt::bench::Args a;
  if (!ckpt::bench::parse(argc, argv, &a)) {
    std::fprintf(stderr,
                 "usage: cuda_restore_bench [--mb 2048] [--tensor-mb 64] [--small 256] [--reps 5] "
                 "[--cold-reps 3] [--threads N] [--chunk-mb 8] [--buffers N] [--dir DIR]\n");
    return 64;
  }
  return ckpt::bench::run(a);
}
