#include "resume/load_all.h"

#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <memory>

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

// One anonymous mapping for every tensor of a rank file, each at a 64-byte boundary, faulted in
// before the reads in one call (MADV_POPULATE_WRITE, Linux 5.14; else a write per page): on the
// development VM first-touch memory costs 2-7 s per GB, more than the reads, and would otherwise
// land inside them. Transparent huge pages are not asked for: populating them was as slow or
// slower there (2.7-6.9 s against 2.4-2.8 s per GB, loaded machine).
class Arena {
 public:
  static Result<Arena> populated(uint64_t bytes, const std::string& fpath) {
    Arena a;
    a.len_ = static_cast<size_t>(std::max<uint64_t>(bytes, 1));
    a.base_ = ::mmap(nullptr, a.len_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (a.base_ == MAP_FAILED) {
      a.base_ = nullptr;
      return io_error(fpath + ": cannot map " + std::to_string(a.len_) +
                      " bytes of host memory to load it into");
    }
#ifdef MADV_POPULATE_WRITE
    if (::madvise(a.base_, a.len_, MADV_POPULATE_WRITE) == 0) return a;
    if (errno != EINVAL) {  // out of memory: say so now, not with a SIGBUS later
      return io_error(fpath + ": cannot populate " + std::to_string(a.len_) +
                      " bytes of host memory to load it into: " + std::strerror(errno));
    }
#endif
    volatile unsigned char* p = static_cast<unsigned char*>(a.base_);
    for (size_t at = 0; at < a.len_; at += 4096) p[at] = 0;
    return a;
  }
  Arena() = default;
  Arena(Arena&& o) noexcept : base_(o.base_), len_(o.len_) { o.base_ = nullptr; }
  Arena& operator=(Arena&& o) noexcept {
    std::swap(base_, o.base_);
    std::swap(len_, o.len_);
    return *this;
  }
  ~Arena() {
    if (base_ != nullptr) ::munmap(base_, len_);
  }
  unsigned char* at(uint64_t offset) const { return static_cast<unsigned char*>(base_) + offset; }

 private:
  void* base_ = nullptr;
  size_t len_ = 0;
};

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
    CKPT_ASSIGN_OR_RETURN(Arena arena, Arena::populated(total, rs.file));
    uint64_t at = 0;
    for (const ManifestEntry& e : rs.manifest.tensors) {
      ro.destinations[e.path] = {arena.at(at), static_cast<size_t>(e.nbytes)};
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
    arena = Arena();
    out.alloc_seconds += since(tf);
    out.threads = std::max(out.threads, stats.threads);
    out.bytes += stats.tensor_bytes;
    out.tensors += stats.tensors;
  }
  return out;
}

}  // namespace ckpt::resume
