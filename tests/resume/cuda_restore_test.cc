// The GPU restore path. [cuda] cases need a device and skip with a WARN without one; the case
// tagged [resume] checks what happens on a machine without a GPU and runs everywhere.
#include <cuda_runtime_api.h>

#include <catch2/catch.hpp>
#include <cstring>
#include <vector>

#include "ckpt/base/hash.h"
#include "ckpt/store/rank_io.h"
#include "resume/cuda/cuda_status.h"
#include "resume/cuda/device_restore.h"
#include "resume/cuda/pinned_ring.h"
#include "resume_test_util.h"

namespace ckpt::resume::cuda::cuda_restore_test {
namespace {

#define SKIP_WITHOUT_GPU()          \
  do {                              \
    std::string why_;               \
    if (!device_available(&why_)) { \
      WARN("skipped: " << why_);    \
      return;                       \
    }                               \
  } while (0)

// Device memory for every tensor of a manifest, freed on destruction.
struct DeviceTensors {
  std::map<std::string, DeviceSpan> spans;
  ~DeviceTensors() {
    for (auto& [path, s] : spans) cudaFree(s.data);
  }
  void allocate(const Manifest& m) {
    for (const auto& e : m.tensors) {
      void* p = nullptr;
      if (e.nbytes > 0) REQUIRE(cudaMalloc(&p, e.nbytes) == cudaSuccess);
      if (e.nbytes > 0) REQUIRE(cudaMemset(p, 0xAA, e.nbytes) == cudaSuccess);
      spans[e.path] = {p, e.nbytes};
    }
  }
  std::vector<unsigned char> download(const std::string& path) {
    const DeviceSpan& s = spans.at(path);
    std::vector<unsigned char> host(s.nbytes);
    if (s.nbytes > 0) {
      REQUIRE(cudaMemcpy(host.data(), s.data, s.nbytes, cudaMemcpyDeviceToHost) == cudaSuccess);
    }
    return host;
  }
};

using Saved = resume_test::SavedRank;
constexpr auto save = resume_test::save_varied;

TEST_CASE("without a GPU the device restorer says so in one line", "[resume]") {
  std::string why;
  if (device_available(&why)) {
    WARN("a GPU is present; the no-GPU message is not exercised here");
    return;
  }
  REQUIRE(why.rfind("no CUDA device: ", 0) == 0);
  REQUIRE(why.find('\n') == std::string::npos);
  auto r = DeviceRestorer::create({});
  REQUIRE(r.status().code() == Code::kUnsupported);
  REQUIRE(r.status().message().find("use the CPU restore path") != std::string::npos);
}

TEST_CASE("restore into device memory equals the saved bytes", "[cuda]") {
  SKIP_WITHOUT_GPU();
  Saved s;
  save(&s);
  for (uint64_t chunk : {65536ull, 8ull << 20}) {
    for (unsigned threads : {1u, 3u}) {
      for (size_t buffers : {size_t{0}, size_t{2}}) {
        INFO("chunk " << chunk << " threads " << threads << " buffers " << buffers);
        DeviceRestorerOptions o;
        o.chunk_bytes = chunk;
        o.io_threads = threads;
        o.ring_buffers = buffers;
        auto restorer = DeviceRestorer::create(o);
        REQUIRE(restorer.is_ok());
        DeviceTensors dev;
        dev.allocate(s.manifest);
        auto stats = (*restorer)->restore(Env::posix(), s.dir.path(), 0, dev.spans);
        INFO(stats.status().to_string());
        REQUIRE(stats.is_ok());
        REQUIRE(stats->tensors == s.manifest.tensors.size());
        for (const auto& e : s.manifest.tensors) {
          INFO(e.path);
          const std::vector<unsigned char> got = dev.download(e.path);
          REQUIRE(xxh3_64(got.data(), got.size()) == e.xxh3);
        }
        // A second restore through the same ring (buffers recycled) is still exact.
        REQUIRE((*restorer)->restore(Env::posix(), s.dir.path(), 0, dev.spans).is_ok());
        const std::vector<unsigned char> big = dev.download("/model/bigger");
        const Tensor& orig = s.tree.children.at("model").tensors.at("bigger");
        REQUIRE(std::memcmp(big.data(), orig.data, orig.nbytes) == 0);
      }
    }
  }
}

TEST_CASE("a flipped byte fails the device restore with the tensor's name", "[cuda]") {
  SKIP_WITHOUT_GPU();
  Saved s;
  save(&s);
  const ManifestEntry* e = nullptr;
  for (const auto& x : s.manifest.tensors) {
    if (x.path == "/model/bigger") e = &x;
  }
  REQUIRE(e != nullptr);
  resume_test::flip_bit(path_join(s.dir.path(), rank_file_name(0)), e->offset + 77777);
  DeviceRestorerOptions o;
  o.chunk_bytes = 65536;
  auto restorer = DeviceRestorer::create(o);
  REQUIRE(restorer.is_ok());
  DeviceTensors dev;
  dev.allocate(s.manifest);
  auto stats = (*restorer)->restore(Env::posix(), s.dir.path(), 0, dev.spans);
  REQUIRE(stats.status().code() == Code::kCorrupt);
  REQUIRE(stats.status().message().find("tensor \"/model/bigger\" in ") == 0);
  REQUIRE(stats.status().message().find("xxh3 mismatch at offset") != std::string::npos);
}

TEST_CASE("device destinations of the wrong size or in host memory are refused", "[cuda]") {
  SKIP_WITHOUT_GPU();
  Saved s;
  save(&s);
  auto restorer = DeviceRestorer::create({});
  REQUIRE(restorer.is_ok());
  DeviceTensors dev;
  dev.allocate(s.manifest);
  std::map<std::string, DeviceSpan> wrong = {
      {"/model/big", {dev.spans.at("/model/big").data, dev.spans.at("/model/big").nbytes - 4}}};
  auto r1 = (*restorer)->restore(Env::posix(), s.dir.path(), 0, wrong);
  REQUIRE(r1.status().code() == Code::kMismatch);
  std::vector<unsigned char> host(dev.spans.at("/model/big").nbytes);
  std::map<std::string, DeviceSpan> on_host = {{"/model/big", {host.data(), host.size()}}};
  auto r2 = (*restorer)->restore(Env::posix(), s.dir.path(), 0, on_host);
  REQUIRE(r2.status().code() == Code::kInvalidArgument);
  REQUIRE(r2.status().message().find("not memory of CUDA device") != std::string::npos);
}

TEST_CASE("the pinned ring recycles buffers only after their copies complete", "[cuda]") {
  SKIP_WITHOUT_GPU();
  // One buffer, reused for every chunk: each fill must wait for the previous copy, so the device
  // ends up with every chunk intact (a premature reuse would overwrite bytes still in flight).
  const size_t chunk = 1 << 20, chunks = 64;
  auto ring = PinnedRing::create(1, chunk);
  REQUIRE(ring.is_ok());
  CudaStream stream;
  REQUIRE(stream.create().is_ok());
  void* dev = nullptr;
  REQUIRE(cudaMalloc(&dev, chunk * chunks) == cudaSuccess);
  for (size_t k = 0; k < chunks; ++k) {
    auto idx = (*ring)->acquire();
    REQUIRE(idx.is_ok());
    std::memset((*ring)->data(*idx), static_cast<int>(k), chunk);
    REQUIRE(cudaMemcpyAsync(static_cast<unsigned char*>(dev) + k * chunk, (*ring)->data(*idx),
                            chunk, cudaMemcpyHostToDevice, stream.get()) == cudaSuccess);
    REQUIRE((*ring)->mark_copying(*idx, stream.get()).is_ok());
    (*ring)->release(*idx, true);
  }
  REQUIRE((*ring)->drain().is_ok());
  std::vector<unsigned char> back(chunk * chunks);
  REQUIRE(cudaMemcpy(back.data(), dev, back.size(), cudaMemcpyDeviceToHost) == cudaSuccess);
  cudaFree(dev);
  for (size_t k = 0; k < chunks; ++k) {
    INFO("chunk " << k);
    REQUIRE(back[k * chunk] == static_cast<unsigned char>(k));
    REQUIRE(back[k * chunk + chunk - 1] == static_cast<unsigned char>(k));
  }
}

}  // namespace
}  // namespace ckpt::resume::cuda::cuda_restore_test
