#include "resume/cuda/device_restore.h"

#include <chrono>
#include <exception>
#include <vector>

#include "ckpt/store/rank_io.h"
#include "resume/cuda/cuda_status.h"
#include "resume/cuda/pinned_ring.h"
#include "resume/pipeline.h"
#include "resume/read_plan.h"

namespace ckpt::resume::cuda {
namespace {

// Stages every chunk in a ring buffer and copies its pieces to the device on the worker's stream.
// Per-worker state is indexed by worker id; each worker touches only its own entries.
class DeviceSink final : public ChunkSink {
 public:
  DeviceSink(const ReadPlan& plan, const std::vector<unsigned char*>& dst, PinnedRing* ring,
             const std::vector<CudaStream>& streams, int device)
      : plan_(plan),
        dst_(dst),
        ring_(ring),
        streams_(streams),
        device_(device),
        held_(streams.size(), 0),
        copied_(streams.size(), 0),
        device_set_(streams.size(), 0) {}

  Result<unsigned char*> acquire(unsigned w, const PlanChunk& c) override {
    if (w >= streams_.size()) return internal_error("device restore: worker index out of range");
    if (c.nbytes > ring_->buffer_bytes()) {
      return internal_error("device restore: chunk of " + std::to_string(c.nbytes) +
                            " bytes exceeds the staging buffer");
    }
    if (!device_set_[w]) {  // the current device is per thread
      CKPT_RETURN_IF_ERROR(cuda_status(cudaSetDevice(device_), "cudaSetDevice"));
      device_set_[w] = 1;
    }
    CKPT_ASSIGN_OR_RETURN(size_t idx, ring_->acquire());
    held_[w] = idx;
    copied_[w] = 0;
    return ring_->data(idx);
  }

  Status deliver(unsigned w, const PlanChunk& c, unsigned char* bytes) override {
    cudaStream_t stream = streams_[w].get();
    Status s;
    for (uint32_t k = 0; k < c.piece_count && s.is_ok(); ++k) {
      const PlanPiece& p = plan_.pieces[c.first_piece + k];
      s = cuda_status(cudaMemcpyAsync(dst_[p.tensor] + p.tensor_offset, bytes + p.chunk_offset,
                                      p.nbytes, cudaMemcpyHostToDevice, stream),
                      "cudaMemcpyAsync of tensor \"" + plan_.tensors[p.tensor].path + "\"");
    }
    if (s.is_ok()) s = ring_->mark_copying(held_[w], stream);
    if (!s.is_ok()) {
      // Copies already enqueued may still read the buffer; it is only Free once they are done.
      cudaStreamSynchronize(stream);
      return s;
    }
    copied_[w] = 1;
    return Status::ok();
  }

  bool overlaps_hashing() const override { return true; }  // the H2D copy runs while hashing

  Status release(unsigned w, const PlanChunk&, unsigned char*) override {
    ring_->release(held_[w], copied_[w] != 0);
    copied_[w] = 0;
    return Status::ok();
  }

  Status finish() override {
    Status first;
    for (const auto& st : streams_) {
      Status s = cuda_status(cudaStreamSynchronize(st.get()), "cudaStreamSynchronize");
      if (first.is_ok() && !s.is_ok()) first = s;
    }
    Status d = ring_->drain();
    return first.is_ok() ? d : first;
  }

 private:
  const ReadPlan& plan_;
  const std::vector<unsigned char*>& dst_;
  PinnedRing* ring_;
  const std::vector<CudaStream>& streams_;
  int device_;
  std::vector<size_t> held_;
  std::vector<char> copied_;
  std::vector<char> device_set_;
};

Status check_device_pointer(const std::string& path, const DeviceSpan& span, int device) {
  if (span.nbytes == 0) return Status::ok();
  if (span.data == nullptr) {
    return invalid_argument("destination for tensor \"" + path + "\" is a null pointer");
  }
  cudaPointerAttributes attr{};
  const cudaError_t err = cudaPointerGetAttributes(&attr, span.data);
  if (err != cudaSuccess) {
    cudaGetLastError();
    return invalid_argument("destination for tensor \"" + path +
                            "\": " + cuda_status(err, "cudaPointerGetAttributes").message());
  }
  const bool on_device = attr.type == cudaMemoryTypeDevice || attr.type == cudaMemoryTypeManaged;
  if (!on_device || attr.device != device) {
    return invalid_argument("destination for tensor \"" + path +
                            "\" is not memory of CUDA device " + std::to_string(device));
  }
  return Status::ok();
}

}  // namespace

struct DeviceRestorer::Impl {
  std::unique_ptr<PinnedRing> ring;
  std::vector<CudaStream> streams;  // one per I/O thread
};

bool gpu_path_available(std::string* why) { return device_available(why); }

DeviceRestorer::DeviceRestorer(const DeviceRestorerOptions& options)
    : options_(options), impl_(new Impl) {}

DeviceRestorer::~DeviceRestorer() {
  if (impl_ != nullptr) {
    for (const auto& st : impl_->streams) cudaStreamSynchronize(st.get());
  }
}

Result<std::unique_ptr<DeviceRestorer>> DeviceRestorer::create(
    const DeviceRestorerOptions& options) {
  std::string why;
  if (!device_available(&why)) {
    return unsupported(why + "; use the CPU restore path (resume::restore_rank)");
  }
  try {
    DeviceRestorerOptions o = options;
    if (o.io_threads == 0) o.io_threads = default_io_threads();
    if (o.ring_buffers == 0) o.ring_buffers = 2 * size_t{o.io_threads};
    // Each worker holds at most one buffer while it fills it: more workers than buffers would
    // only wait.
    if (o.ring_buffers < o.io_threads) o.io_threads = static_cast<unsigned>(o.ring_buffers);
    if (o.chunk_bytes == 0) return invalid_argument("device restore: chunk_bytes must be > 0");
    CKPT_RETURN_IF_ERROR(
        cuda_status(cudaSetDevice(o.device), "cudaSetDevice(" + std::to_string(o.device) + ")"));
    std::unique_ptr<DeviceRestorer> r(new DeviceRestorer(o));
    CKPT_ASSIGN_OR_RETURN(r->impl_->ring, PinnedRing::create(o.ring_buffers, o.chunk_bytes));
    r->impl_->streams.resize(o.io_threads);
    for (auto& st : r->impl_->streams) CKPT_RETURN_IF_ERROR(st.create());
    return r;
  } catch (const std::exception& e) {
    return internal_error(std::string("device restore: ") + e.what());
  }
}

Result<DeviceRestoreStats> DeviceRestorer::restore(
    Env* env, const std::string& step_dir, int64_t rank,
    const std::map<std::string, DeviceSpan>& destinations, bool verify_hashes) {
  try {
    const auto t0 = std::chrono::steady_clock::now();
    CKPT_RETURN_IF_ERROR(cuda_status(cudaSetDevice(options_.device), "cudaSetDevice"));
    CKPT_ASSIGN_OR_RETURN(Manifest m, store::read_manifest(env, step_dir, rank));
    const std::string fpath = path_join(step_dir, m.file);
    std::map<std::string, size_t> by_path;
    for (size_t i = 0; i < m.tensors.size(); ++i) by_path[m.tensors[i].path] = i;
    std::vector<size_t> selected;
    for (const auto& [path, span] : destinations) {
      auto it = by_path.find(path);
      if (it == by_path.end()) {
        return not_found("destination for tensor \"" + path + "\": " + fpath +
                         " has no such tensor");
      }
      const uint64_t want = m.tensors[it->second].nbytes;
      if (span.nbytes != want) {
        return mismatch("tensor \"" + path + "\" in " + fpath + ": destination holds " +
                        std::to_string(span.nbytes) + " bytes, expected " + std::to_string(want));
      }
      CKPT_RETURN_IF_ERROR(check_device_pointer(path, span, options_.device));
      selected.push_back(it->second);
    }
    PlanOptions popts;
    popts.chunk_bytes = options_.chunk_bytes;
    popts.max_gap = options_.max_gap;
    CKPT_ASSIGN_OR_RETURN(ReadPlan plan, make_read_plan(m, selected, popts));
    std::vector<unsigned char*> dst(plan.tensors.size());
    for (size_t i = 0; i < plan.tensors.size(); ++i) {
      dst[i] = static_cast<unsigned char*>(destinations.at(plan.tensors[i].path).data);
    }
    CKPT_ASSIGN_OR_RETURN(auto file, env->open_random(fpath));

    DeviceSink sink(plan, dst, impl_->ring.get(), impl_->streams, options_.device);
    PipelineOptions pipe;
    pipe.io_threads = static_cast<unsigned>(impl_->streams.size());
    pipe.verify_hashes = verify_hashes;
    PipelineStats ps;
    CKPT_RETURN_IF_ERROR(run_pipeline(*file, plan, &sink, pipe, &ps));

    DeviceRestoreStats stats;
    stats.tensor_bytes = plan.tensor_bytes;
    stats.read_bytes = ps.read_bytes;
    stats.tensors = plan.tensors.size();
    stats.chunks = ps.chunks;
    stats.threads = ps.threads;
    stats.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return stats;
  } catch (const std::exception& e) {
    return internal_error(path_join(step_dir, rank_file_name(rank)) +
                          ": device restore: " + e.what());
  }
}

}  // namespace ckpt::resume::cuda
