// FaultInjectionEnv: wraps another Env and makes the N-th mutating operation (create, write,
// fsync, rename, remove) fail, and every one after it — a process that died at that point. Tests
// walk N over every operation of a save to prove that LATEST never names an incomplete checkpoint.
//
// It also remembers what the OS would lose in a power failure at that point, and drop_unsynced()
// makes it so (the LevelDB fault_injection_test model):
//   - a file's bytes written since its last fsync revert to what they were at that fsync (a file
//     never synced through this Env — new, or written by HDF5's own driver — reverts to empty);
//   - with CrashLoss::kDataAndEntries, every directory change (create, mkdir, rename, unlink,
//     rmdir, exchange) since the last fsync of that directory is undone too, newest first; a rename
//     over a file brings the old file back.
// Without drop_unsynced() a crash is fail-stop: everything done before it stays.
//
// Reads fail on request too (fail_reads): a file that ends early, or a disk that answers EIO,
// from a given byte on. That is how tests reach the foreign-format readers with a short read or
// an I/O error in the middle of a torch.save zip or a safetensors file. Not thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "ckpt/io/env.h"

namespace ckpt {

// What a failed read looks like to the reader.
enum class ReadFault {
  kShortRead,  // the file ends at the fault offset: a kCorrupt "truncated" error
  kIoError,    // the device fails from the fault offset on: a kIoError "Input/output error"
};

enum class CrashLoss {
  kData,            // unsynced file bytes vanish; directory entries survive
  kDataAndEntries,  // unsynced file bytes and unsynced directory entries vanish
};

class FaultInjectionEnv final : public Env {
 public:
  explicit FaultInjectionEnv(Env* base) : base_(base) {}

  // Fail the operation with this 1-based index and all later ones; 0 = never fail.
  void fail_at(uint64_t n) {
    std::lock_guard<std::recursive_mutex> g(mu_);
    fail_at_ = n;
  }
  uint64_t operations() const {
    std::lock_guard<std::recursive_mutex> g(mu_);
    return ops_;
  }
  bool crashed() const {
    std::lock_guard<std::recursive_mutex> g(mu_);
    return fail_at_ != 0 && ops_ >= fail_at_;
  }

  // The power failure: rewrites the base Env's files as described above, then forgets every
  // pending change and stops failing (the next process starts clean).
  Status drop_unsynced(CrashLoss loss);

  Result<std::unique_ptr<WritableFile>> new_writable(const std::string& path) override;
  Result<std::unique_ptr<WritableFile>> open_for_update(const std::string& path) override;
  Result<std::unique_ptr<WritableFile>> open_append(const std::string& path) override;
  // Every read of `path` (opened through this Env after the call) that reaches byte `offset` or
  // beyond fails as `fault`; reads before it succeed. Reads are not counted as operations.
  void fail_reads(const std::string& path, uint64_t offset, ReadFault fault) {
    std::lock_guard<std::recursive_mutex> g(mu_);
    read_faults_[path] = {offset, fault};
  }
  Result<std::unique_ptr<RandomAccessFile>> open_random(const std::string& path) override;
  Status rename(const std::string& from, const std::string& to) override;
  // Counted as one operation; a crash before the directory's fsync swaps the two back.
  Status exchange(const std::string& a, const std::string& b) override;
  Status sync_dir(const std::string& dir) override;
  Status make_dirs(const std::string& dir) override;
  Status remove_file(const std::string& path) override;
  Status remove_tree(const std::string& dir) override;
  Status remove_dir(const std::string& dir) override;
  Result<FileKind> entry_kind(const std::string& path) override { return base_->entry_kind(path); }
  Result<std::unique_ptr<FileLock>> lock_file(const std::string& path,
                                              const std::string& owner) override {
    return base_->lock_file(path, owner);
  }
  bool exists(const std::string& path) override { return base_->exists(path); }
  bool is_dir(const std::string& path) override { return base_->is_dir(path); }
  Result<uint64_t> file_size(const std::string& path) override { return base_->file_size(path); }
  Result<std::vector<std::string>> list_dir(const std::string& dir) override {
    return base_->list_dir(dir);
  }

  // Counts one operation; an error once the failure point is reached.
  Status tick(const std::string& what);
  // Bookkeeping of the crash model, called by the file objects.
  void will_write(const std::string& path);
  void synced(const std::string& path);

 private:
  struct DirChange {
    enum Kind { kCreate, kMkdir, kRename, kRemove, kRemoveDir, kExchange } kind;
    std::string dir;                       // the directory whose fsync makes it durable
    std::string path;                      // created/removed path, or the rename target
    std::string from;                      // rename source (kExchange: the other entry)
    std::optional<std::string> old_bytes;  // a replaced or removed file's durable bytes
  };
  Result<std::unique_ptr<WritableFile>> wrap(Result<std::unique_ptr<WritableFile>> f,
                                             const std::string& path);
  std::string durable_bytes(const std::string& path);  // what a crash now would leave
  void note_create(const std::string& path);
  Status undo(const DirChange& c);

  Env* base_;
  // The crash model's bookkeeping is shared by the file objects, which writers use from several
  // threads (write_rank syncs the rank file while it writes the manifest; DirectWriter's
  // writers): every method takes this lock (the base Env's own calls run unlocked only in
  // FaultyWritable's data path).
  mutable std::recursive_mutex mu_;
  uint64_t ops_ = 0;
  uint64_t fail_at_ = 0;
  std::map<std::string, std::string> dirty_;  // path → bytes as of its last fsync
  std::set<std::string> synced_;              // files fsynced through this Env
  std::vector<DirChange> changes_;            // not yet made durable, oldest first
  std::map<std::string, std::pair<uint64_t, ReadFault>> read_faults_;  // path → (offset, fault)
};

}  // namespace ckpt
