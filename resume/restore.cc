#include "resume/restore.h"

#include <chrono>
#include <cstring>
#include <exception>
#include <memory>
#include <vector>

#include "ckpt/base/hash.h"
#include "ckpt/h5/rank_file.h"
#include "ckpt/store/rank_io.h"
#include "resume/pipeline.h"
#include "resume/read_plan.h"

namespace ckpt::resume {
namespace {

using Clock = std::chrono::steady_clock;

double since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// Reads chunks straight into the destination when a chunk is one whole piece of one tensor;
// otherwise into the worker's staging buffer, then copies each piece out (the coalesced small
// tensors: one syscall instead of many, one memcpy each while the chunk is in cache).
class HostSink final : public ChunkSink {
 public:
  HostSink(const ReadPlan& plan, const std::vector<unsigned char*>& dst, unsigned workers)
      : plan_(plan), dst_(dst), staging_(workers) {}

  Result<unsigned char*> acquire(unsigned worker, const PlanChunk& c) override {
    if (plan_.is_direct(c)) {
      const PlanPiece& p = plan_.pieces[c.first_piece];
      return dst_[p.tensor] + p.tensor_offset;
    }
    if (worker >= staging_.size()) return internal_error("restore: worker index out of range");
    Staging& s = staging_[worker];
    if (s.size < c.nbytes) {  // grows to the largest coalesced chunk this worker meets
      s.bytes.reset(new unsigned char[c.nbytes]);
      s.size = c.nbytes;
    }
    return s.bytes.get();
  }

  Status deliver(unsigned, const PlanChunk& c, unsigned char* bytes) override {
    if (plan_.is_direct(c)) return Status::ok();
    for (uint32_t k = 0; k < c.piece_count; ++k) {
      const PlanPiece& p = plan_.pieces[c.first_piece + k];
      std::memcpy(dst_[p.tensor] + p.tensor_offset, bytes + p.chunk_offset, p.nbytes);
    }
    return Status::ok();
  }

  Status release(unsigned, const PlanChunk&, unsigned char*) override { return Status::ok(); }

 private:
  const ReadPlan& plan_;
  const std::vector<unsigned char*>& dst_;
  struct Staging {
    std::unique_ptr<unsigned char[]> bytes;
    uint64_t size = 0;
  };
  std::vector<Staging> staging_;  // one per worker; each worker touches only its own
};

Status check_destinations(const Manifest& m, const RestoreOptions& options,
                          const std::string& fpath) {
  std::map<std::string, const ManifestEntry*> by_path;
  for (const auto& e : m.tensors) by_path[e.path] = &e;
  for (const auto& [path, span] : options.destinations) {
    auto it = by_path.find(path);
    if (it == by_path.end()) {
      return not_found("destination for tensor \"" + path + "\": " + fpath +
                       " has no such tensor (aliases have no bytes of their own)");
    }
    if (!options.components.empty() && options.components.count(store::top_component(path)) == 0) {
      return invalid_argument("destination for tensor \"" + path +
                              "\" is outside the requested components");
    }
    const uint64_t want = it->second->nbytes;
    if (span.nbytes != want) {
      return mismatch("tensor \"" + path + "\" in " + fpath + ": destination holds " +
                      std::to_string(span.nbytes) + " bytes, expected " + std::to_string(want));
    }
    if (span.data == nullptr && want > 0) {
      return invalid_argument("destination for tensor \"" + path + "\" is a null pointer");
    }
  }
  return Status::ok();
}

Result<Node> restore_impl(Env* env, const std::string& step_dir, int64_t rank,
                          const RestoreOptions& options, RestoreStats* stats) {
  const auto t0 = Clock::now();
  CKPT_ASSIGN_OR_RETURN(store::RankStructure rs, store::open_rank_structure(env, step_dir, rank));
  const Manifest& m = rs.manifest;
  const std::string& fpath = rs.file;
  Node& root = rs.root;
  CKPT_RETURN_IF_ERROR(check_destinations(m, options, fpath));

  std::vector<size_t> selected;
  for (size_t i = 0; i < m.tensors.size(); ++i) {
    if (options.components.empty() ||
        options.components.count(store::top_component(m.tensors[i].path))) {
      selected.push_back(i);
    }
  }
  PlanOptions popts;
  popts.chunk_bytes = options.chunk_bytes;
  popts.max_gap = options.max_gap;
  CKPT_ASSIGN_OR_RETURN(ReadPlan plan, make_read_plan(m, selected, popts));

  // Destinations: the caller's span, or memory the tree will own.
  RestoreStats local;
  std::vector<unsigned char*> dst(plan.tensors.size(), nullptr);
  std::vector<Tensor*> tensors(plan.tensors.size(), nullptr);
  for (size_t i = 0; i < plan.tensors.size(); ++i) {
    const PlanTensor& pt = plan.tensors[i];
    Tensor* t = store::find_tensor(&root, pt.path);
    if (t == nullptr) return internal_error(fpath + ": \"" + pt.path + "\" vanished from the tree");
    tensors[i] = t;
    auto d = options.destinations.find(pt.path);
    if (d != options.destinations.end()) {
      dst[i] = static_cast<unsigned char*>(d->second.data);
      t->data = dst[i];
      ++local.placed;
    } else {
      std::shared_ptr<unsigned char[]> owned(new unsigned char[pt.nbytes == 0 ? 1 : pt.nbytes]);
      dst[i] = owned.get();
      t->data = owned.get();
      t->keepalive = std::shared_ptr<const void>(owned, owned.get());
    }
    t->nbytes = pt.nbytes;
  }
  CKPT_ASSIGN_OR_RETURN(auto file, env->open_random(fpath));
  local.metadata_seconds = since(t0);

  const auto t1 = Clock::now();
  PipelineOptions pipe;
  pipe.io_threads = options.io_threads == 0 ? default_io_threads() : options.io_threads;
  pipe.verify_hashes = options.verify_hashes;
  HostSink sink(plan, dst, pipe.io_threads);
  PipelineStats ps;
  CKPT_RETURN_IF_ERROR(run_pipeline(*file, plan, &sink, pipe, &ps));
  local.data_seconds = since(t1);

  CKPT_RETURN_IF_ERROR(store::link_aliases(rs.datasets, &root, fpath));
  local.tensor_bytes = plan.tensor_bytes;
  local.read_bytes = ps.read_bytes;
  local.tensors = plan.tensors.size();
  local.chunks = ps.chunks;
  local.threads = ps.threads;
  if (stats != nullptr) *stats = local;
  return std::move(rs.root);
}

}  // namespace

Result<Node> restore_rank(Env* env, const std::string& step_dir, int64_t rank,
                          const RestoreOptions& options, RestoreStats* stats) {
  try {
    return restore_impl(env, step_dir, rank, options, stats);
  } catch (const std::exception& e) {  // allocation failure for a large tensor
    return internal_error(path_join(step_dir, rank_file_name(rank)) + ": restore: " + e.what());
  }
}

}  // namespace ckpt::resume
