#include "resume/load_all.h"

#include <algorithm>
#include <chrono>
#include <memory>
#include <utility>

#include "ckpt/io/host_memory.h"
#include "ckpt/store/run_dir.h"
#include "resume/pipeline.h"
#include "resume/restore.h"

namespace ckpt::resume {

Result<std::string> resolve_checkpoint(Env* env, const std::string& path) {
  if (!env->exists(path)) return not_found(path + ": no such file or directory");
  if (!env->is_dir(path)) {
    return corrupt(path + ": not a ckpt checkpoint (expected a run or step directory)");
  }
  if (env->exists(path_join(path, "COMMIT.json"))) return path;
  auto latest = store::find_latest(env, path);
  if (!latest.is_ok()) {
    if (latest.status().code() == Code::kNotFound) {
      return not_found(path + ": no committed checkpoint (not a ckpt run or step directory?)");
    }
    return latest.status();
  }
  return latest->dir;
}

namespace {

using Clock = std::chrono::steady_clock;

double since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

uint64_t aligned(uint64_t n) { return (n + 63) / 64 * 64; }

}  // namespace

Result<LoadAllStats> load_all_host(Env* env, const std::string& step_dir,
                                   const LoadAllOptions& options) {
  CKPT_ASSIGN_OR_RETURN(CommitRecord commit, store::read_commit(env, step_dir));
  LoadAllStats out;
  out.ranks = commit.world_size;
  RestoreOptions base;
  base.io_threads = options.io_threads;  // 0: what each file's storage asks for (restore.h)
  base.verify_hashes = options.verify_hashes;
  for (int64_t rank = 0; rank < commit.world_size; ++rank) {
    auto t0 = Clock::now();
    CKPT_ASSIGN_OR_RETURN(const CommitFile listed, store::listed_rank_file(commit, step_dir, rank));
    // The datasets come from the manifest: every byte of the file, their headers included, is
    // then checked against the commit record (unverified, nothing is).
    CKPT_ASSIGN_OR_RETURN(
        store::RankStructure rs,
        store::open_rank_structure(env, step_dir, rank, store::DatasetCheck::kFromManifest));
    RestoreOptions ro = base;
    if (options.verify_hashes) check_whole_file(listed, &ro);
    uint64_t total = 0;
    for (const ManifestEntry& e : rs.manifest.tensors) total += aligned(e.nbytes);
    out.seconds += since(t0);

    const auto ta = Clock::now();
    // One block for every tensor of the rank file, each at a 64-byte boundary, faulted in before
    // the reads in one call (host_memory.h: first-touch memory costs more than the reads).
    auto memory = HostMemory::allocate(total, /*populate=*/true, "the tensors it holds");
    if (!memory.is_ok()) return memory.status().with_context(rs.file);
    HostMemory arena = std::move(memory).value();
    uint64_t at = 0;
    for (const ManifestEntry& e : rs.manifest.tensors) {
      ro.destinations[e.path] = {arena.data() + at, static_cast<size_t>(e.nbytes)};
      at += aligned(e.nbytes);
    }
    out.alloc_seconds += since(ta);

    t0 = Clock::now();
    RestoreStats stats;
    Status loaded;
    {
      auto tree = restore_rank(env, std::move(rs), ro, &stats);
      out.seconds += since(t0);
      loaded = tree.status();
    }  // the tree points into the arena: gone before it
    CKPT_RETURN_IF_ERROR(loaded);
    const auto tf = Clock::now();
    arena = HostMemory();
    out.alloc_seconds += since(tf);
    out.threads = std::max(out.threads, stats.threads);
    out.bytes += stats.tensor_bytes;
    out.tensors += stats.tensors;
  }
  return out;
}

}  // namespace ckpt::resume
