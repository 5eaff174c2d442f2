// Retention (step 5 of the commit protocol in run_dir.h) and the run directory's writer lock.
//
// Retention deletes, so it proves before it deletes: the victim is an entry directly inside the
// run directory, named step-N, that lstat says is a directory (a symlink to a checkpoint
// elsewhere is never followed), holding only regular files with the names this format writes.
// Anything else — a symlink, a file it did not write, a damaged commit record that someone may
// want to look at — stays, and the reason is returned for the journal.
#include <unistd.h>

#include <algorithm>
#include <map>
#include <mutex>
#include <tuple>

#include "ckpt/format/manifest.h"
#include "ckpt/store/run_dir.h"

namespace ckpt::store {
namespace {

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// COMMIT.json or a data file (is_data_file), each possibly with ".tmp".
bool is_format_file(std::string name) {
  if (ends_with(name, ".tmp")) name.resize(name.size() - 4);
  return name == "COMMIT.json" || is_data_file(name);
}

// Why `dir` may not be removed, or "" when every entry of it is provably ours.
std::string refuse_reason(Env* env, const std::string& dir) {
  auto kind = env->entry_kind(dir);
  if (!kind.is_ok()) return kind.status().message();
  if (*kind == FileKind::kSymlink) return dir + ": a symbolic link, not removed";
  if (*kind != FileKind::kDirectory) return dir + ": not a directory, not removed";
  auto names = env->list_dir(dir);
  if (!names.is_ok()) return names.status().message();
  for (const auto& n : *names) {
    const std::string p = path_join(dir, n);
    auto k = env->entry_kind(p);
    if (!k.is_ok()) return k.status().message();
    if (*k != FileKind::kRegular || !is_format_file(n)) {
      return dir + ": holds " + n + ", which ckpt did not write; not removed";
    }
  }
  return "";
}

// The rank R of "rank-R.h5", or -1.
int64_t rank_of_file(const std::string& name) {
  if (name.rfind("rank-", 0) != 0 || !ends_with(name, ".h5") || name.size() <= 8) return -1;
  int64_t r = 0;
  for (size_t i = 5; i + 3 < name.size(); ++i) {
    if (name[i] < '0' || name[i] > '9' || r > (int64_t{1} << 40)) return -1;
    r = r * 10 + (name[i] - '0');
  }
  return name == rank_file_name(r) ? r : -1;
}

Status remove_checkpoint(Env* env, const std::string& dir) {
  CKPT_ASSIGN_OR_RETURN(auto names, env->list_dir(dir));
  // COMMIT.json first: a removal cut short leaves an interrupted save, never a checkpoint that
  // claims files it no longer has.
  std::stable_partition(names.begin(), names.end(),
                        [](const std::string& n) { return n == "COMMIT.json"; });
  const bool local = env->object_store(dir) == nullptr;
  bool spare_dir = false;
  for (const auto& n : names) {
    const std::string path = path_join(dir, n);
    const int64_t rank = local ? rank_of_file(n) : -1;
    if (rank >= 0) {
      // Kept as the rank's spare (run_dir.h). Its checkpoint is uncommitted for good first (the
      // removal of COMMIT.json durable): a power failure must not bring back a commit record
      // naming a file the next save overwrites in place.
      const std::string spare = spare_rank_file(dir, rank);
      if (!env->exists(spare)) {
        if (!spare_dir) {
          CKPT_RETURN_IF_ERROR(env->sync_dir(dir));
          CKPT_RETURN_IF_ERROR(env->make_dirs(path_dirname(spare)));
          spare_dir = true;
        }
        if (env->rename(path, spare).is_ok()) continue;
      }
    }
    CKPT_RETURN_IF_ERROR(env->remove_file(path));
  }
  return env->remove_dir(dir);
}

}  // namespace

Status apply_retention(Env* env, const std::string& run_dir, int keep_last, int64_t keep_every,
                       std::vector<std::string>* skipped) {
  if (keep_last <= 0) return Status::ok();
  CKPT_ASSIGN_OR_RETURN(auto all, list_checkpoints(env, run_dir));
  std::vector<const CheckpointEntry*> committed;
  for (const auto& e : all) {
    if (e.committed) committed.push_back(&e);
  }
  if (committed.empty()) return Status::ok();
  const int64_t newest = committed.back()->step;
  const size_t keep_from = committed.size() > static_cast<size_t>(keep_last)
                               ? committed.size() - static_cast<size_t>(keep_last)
                               : 0;
  std::vector<const CheckpointEntry*> victims;
  for (size_t i = 0; i < keep_from; ++i) {
    const CheckpointEntry& e = *committed[i];
    if (keep_every > 0 && e.step % keep_every == 0) continue;
    victims.push_back(&e);
  }
  for (const auto& e : all) {  // leftovers of interrupted saves
    if (!e.committed && !e.damaged && e.step < newest) victims.push_back(&e);
  }
  for (const CheckpointEntry* e : victims) {
    if (e->step == newest) continue;  // never the last valid checkpoint
    const std::string why = refuse_reason(env, e->dir);
    if (!why.empty()) {
      if (skipped != nullptr) skipped->push_back(why);
      continue;
    }
    CKPT_RETURN_IF_ERROR(remove_checkpoint(env, e->dir));
    // What a re-save of this step left when it was killed (run_dir.h, "Re-saving a step").
    const std::string attempt = resave_dir(run_dir, e->step);
    auto kind = env->entry_kind(attempt);
    if (kind.is_ok() && *kind != FileKind::kMissing) {
      const std::string no = refuse_reason(env, attempt);
      if (no.empty()) {
        CKPT_RETURN_IF_ERROR(remove_checkpoint(env, attempt));
      } else if (skipped != nullptr) {
        skipped->push_back(no);
      }
    }
  }
  return Status::ok();
}

namespace {

// The lock itself, shared by every RunDirLock of one process on one run directory.
struct HeldLock {
  std::unique_ptr<FileLock> lock;
  std::string path;  // RUN/LOCK
  std::mutex saving;
};

// Checkpointers of one process on one run directory share its lock: the lock keeps other
// processes out (a relaunched job), not a restore that opens a second Checkpointer.
class SharedLock final : public RunDirLock {
 public:
  explicit SharedLock(std::shared_ptr<HeldLock> held) : held_(std::move(held)) {}
  Status check() const override {
    if (held_->lock->still_at(held_->path)) return Status::ok();
    const std::string why = held_->lock->lost_reason();
    if (!why.empty()) return locked(why);
    return io_error(held_->path +
                    ": the run directory was removed or replaced while this process held its "
                    "lock (the lock is on a file no longer there, and another process may hold "
                    "a new one); refusing to write");
  }
  std::mutex& save_mutex() override { return held_->saving; }

 private:
  std::shared_ptr<HeldLock> held_;
};

}  // namespace

Result<std::unique_ptr<RunDirLock>> lock_run_dir(Env* env, const std::string& run_dir) {
  static std::mutex mu;
  // Keyed by pid too: a forked child inherits the map but is another process.
  static std::map<std::tuple<Env*, std::string, long>, std::weak_ptr<HeldLock>> held;
  const std::string path = path_join(run_dir, "LOCK");
  const auto key = std::make_tuple(env, path, static_cast<long>(getpid()));
  std::lock_guard<std::mutex> g(mu);
  std::shared_ptr<HeldLock> lock = held[key].lock();
  if (lock && !lock->lock->still_at(path)) {
    lock.reset();  // the run directory was replaced: this lock protects nothing there any more
  }
  if (!lock) {
    char host[256] = {0};
    gethostname(host, sizeof host - 1);
    const std::string owner =
        "pid " + std::to_string(static_cast<long>(getpid())) + " host " + host + "\n";
    CKPT_ASSIGN_OR_RETURN(std::unique_ptr<FileLock> taken, env->lock_file(path, owner));
    lock = std::make_shared<HeldLock>();
    lock->lock = std::move(taken);
    lock->path = path;
    held[key] = lock;
  }
  return std::unique_ptr<RunDirLock>(new SharedLock(std::move(lock)));
}

}  // namespace ckpt::store
