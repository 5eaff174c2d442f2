#include "resume/load_all.h"

#include <chrono>

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

Result<LoadAllStats> load_all_host(Env* env, const std::string& step_dir,
                                   const LoadAllOptions& options) {
  CKPT_ASSIGN_OR_RETURN(CommitRecord commit, store::read_commit(env, step_dir));
  LoadAllStats out;
  out.ranks = commit.world_size;
  RestoreOptions ro;
  ro.io_threads = options.io_threads == 0 ? default_io_threads() : options.io_threads;
  ro.verify_hashes = options.verify_hashes;
  out.threads = ro.io_threads;
  const auto t0 = std::chrono::steady_clock::now();
  for (int64_t rank = 0; rank < commit.world_size; ++rank) {
    RestoreStats stats;
    CKPT_ASSIGN_OR_RETURN(Node tree, restore_rank(env, step_dir, rank, ro, &stats));
    out.bytes += stats.tensor_bytes;
    out.tensors += stats.tensors;
  }
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return out;
}

}  // namespace ckpt::resume
