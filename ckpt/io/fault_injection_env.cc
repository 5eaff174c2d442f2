#include "ckpt/io/fault_injection_env.h"

#include <algorithm>

namespace ckpt {
namespace {

class FaultyWritable final : public WritableFile {
 public:
  FaultyWritable(std::unique_ptr<WritableFile> f, FaultInjectionEnv* env, std::string path)
      : f_(std::move(f)), env_(env), path_(std::move(path)) {}
  Status append(const void* d, size_t n) override {
    CKPT_RETURN_IF_ERROR(env_->tick("append"));
    env_->will_write(path_);
    return f_->append(d, n);
  }
  Status write_at(uint64_t off, const void* d, size_t n) override {
    CKPT_RETURN_IF_ERROR(env_->tick("write"));
    env_->will_write(path_);
    return f_->write_at(off, d, n);
  }
  Status sync() override {
    CKPT_RETURN_IF_ERROR(env_->tick("fsync"));
    CKPT_RETURN_IF_ERROR(f_->sync());
    env_->synced(path_);
    return Status::ok();
  }
  Status close() override { return f_->close(); }

 private:
  std::unique_ptr<WritableFile> f_;
  FaultInjectionEnv* env_;
  std::string path_;  // where the file was opened; a later rename is not followed
};

// A file whose reads fail from `fault_at` on, as a shrunk file or a failing disk would.
class FaultyRandom final : public RandomAccessFile {
 public:
  FaultyRandom(std::unique_ptr<RandomAccessFile> f, uint64_t fault_at, ReadFault fault)
      : f_(std::move(f)), fault_at_(fault_at), fault_(fault) {}
  Status read_at(uint64_t offset, void* dst, size_t n) const override {
    if (n > 0 && (offset >= fault_at_ || n > fault_at_ - offset)) {
      if (fault_ == ReadFault::kIoError)
        return io_error(path() + ": read failed: Input/output error");
      return corrupt(path() + ": truncated: unexpected end of file");
    }
    CKPT_RETURN_IF_ERROR(f_->read_at(offset, dst, n));
    count_read(n);
    return Status::ok();
  }
  uint64_t size() const override { return f_->size(); }
  const std::string& path() const override { return f_->path(); }
  std::string version() const override { return f_->version(); }

 private:
  std::unique_ptr<RandomAccessFile> f_;
  uint64_t fault_at_;
  ReadFault fault_;
};

}  // namespace

Result<std::unique_ptr<RandomAccessFile>> FaultInjectionEnv::open_random(const std::string& path) {
  std::lock_guard<std::recursive_mutex> g(mu_);
  CKPT_ASSIGN_OR_RETURN(auto f, base_->open_random(path));
  auto it = read_faults_.find(path);
  if (it == read_faults_.end()) return f;
  return std::unique_ptr<RandomAccessFile>(
      new FaultyRandom(std::move(f), it->second.first, it->second.second));
}

Status FaultInjectionEnv::tick(const std::string& what) {
  std::lock_guard<std::recursive_mutex> g(mu_);
  ++ops_;
  if (fail_at_ != 0 && ops_ >= fail_at_) {
    return io_error("injected fault at operation " + std::to_string(ops_) + " (" + what + ")");
  }
  return Status::ok();
}

std::string FaultInjectionEnv::durable_bytes(const std::string& path) {
  std::lock_guard<std::recursive_mutex> g(mu_);
  auto it = dirty_.find(path);
  if (it != dirty_.end()) return it->second;
  auto text = base_->read_all(path, ~uint64_t{0});
  return text.is_ok() ? *text : std::string();
}

void FaultInjectionEnv::will_write(const std::string& path) {
  std::lock_guard<std::recursive_mutex> g(mu_);
  if (dirty_.count(path) != 0) return;
  dirty_[path] = synced_.count(path) != 0 ? durable_bytes(path) : std::string();
}

void FaultInjectionEnv::synced(const std::string& path) {
  std::lock_guard<std::recursive_mutex> g(mu_);
  dirty_.erase(path);
  synced_.insert(path);
}

void FaultInjectionEnv::note_create(const std::string& path) {
  std::lock_guard<std::recursive_mutex> g(mu_);
  changes_.push_back({DirChange::kCreate, path_dirname(path), path, "", std::nullopt});
}

Result<std::unique_ptr<WritableFile>> FaultInjectionEnv::wrap(
    Result<std::unique_ptr<WritableFile>> f, const std::string& path) {
  if (!f.is_ok()) return f.status();
  return std::unique_ptr<WritableFile>(new FaultyWritable(std::move(f).value(), this, path));
}

Result<std::unique_ptr<WritableFile>> FaultInjectionEnv::new_writable(const std::string& path) {
  std::lock_guard<std::recursive_mutex> g(mu_);
  CKPT_RETURN_IF_ERROR(tick("create " + path));
  const bool existed = base_->exists(path);
  if (existed) {
    will_write(path);  // the truncation is a write like any other
  } else {
    dirty_[path] = "";
  }
  auto f = base_->new_writable(path);
  if (f.is_ok() && !existed) note_create(path);
  return wrap(std::move(f), path);
}

Result<std::unique_ptr<WritableFile>> FaultInjectionEnv::open_for_update(const std::string& path) {
  std::lock_guard<std::recursive_mutex> g(mu_);
  CKPT_RETURN_IF_ERROR(tick("open " + path));
  // A file this Env never synced was written by someone else (HDF5's driver) without an fsync:
  // neither its bytes nor its directory entry are durable yet.
  if (synced_.count(path) == 0 && dirty_.count(path) == 0) {
    dirty_[path] = "";
    note_create(path);
  }
  return wrap(base_->open_for_update(path), path);
}

Result<std::unique_ptr<WritableFile>> FaultInjectionEnv::open_append(const std::string& path) {
  std::lock_guard<std::recursive_mutex> g(mu_);
  CKPT_RETURN_IF_ERROR(tick("open " + path));
  const bool existed = base_->exists(path);
  if (existed) synced_.insert(path);  // an existing journal is assumed durable
  auto f = base_->open_append(path);
  if (f.is_ok() && !existed) {
    dirty_[path] = "";
    note_create(path);
  }
  return wrap(std::move(f), path);
}

Status FaultInjectionEnv::rename(const std::string& from, const std::string& to) {
  std::lock_guard<std::recursive_mutex> g(mu_);
  CKPT_RETURN_IF_ERROR(tick("rename " + from));
  DirChange c{DirChange::kRename, path_dirname(to), to, from, std::nullopt};
  if (base_->exists(to)) c.old_bytes = durable_bytes(to);
  CKPT_RETURN_IF_ERROR(base_->rename(from, to));
  // The bytes and their fsync state travel with the inode.
  dirty_.erase(to);
  synced_.erase(to);
  if (auto it = dirty_.find(from); it != dirty_.end()) {
    dirty_[to] = it->second;
    dirty_.erase(it);
  }
  if (synced_.erase(from) != 0) synced_.insert(to);
  changes_.push_back(std::move(c));
  return Status::ok();
}

Status FaultInjectionEnv::exchange(const std::string& a, const std::string& b) {
  std::lock_guard<std::recursive_mutex> g(mu_);
  CKPT_RETURN_IF_ERROR(tick("exchange " + a));
  CKPT_RETURN_IF_ERROR(base_->exchange(a, b));
  // The bytes and fsync state of every file under one entry move to the other.
  auto swapped = [&](const std::string& p) -> std::string {
    for (const auto& [from, to] : {std::make_pair(a, b), std::make_pair(b, a)}) {
      if (p == from) return to;
      if (p.compare(0, from.size() + 1, from + "/") == 0) return to + p.substr(from.size());
    }
    return p;
  };
  std::map<std::string, std::string> dirty;
  for (auto& [p, bytes] : dirty_) dirty[swapped(p)] = std::move(bytes);
  dirty_ = std::move(dirty);
  std::set<std::string> synced;
  for (const auto& p : synced_) synced.insert(swapped(p));
  synced_ = std::move(synced);
  // changes_ keeps the paths as they were: undone newest first, the exchange is undone before
  // any of them.
  changes_.push_back({DirChange::kExchange, path_dirname(b), b, a, std::nullopt});
  return Status::ok();
}

Status FaultInjectionEnv::sync_dir(const std::string& dir) {
  std::lock_guard<std::recursive_mutex> g(mu_);
  CKPT_RETURN_IF_ERROR(tick("fsync " + dir));
  CKPT_RETURN_IF_ERROR(base_->sync_dir(dir));
  changes_.erase(std::remove_if(changes_.begin(), changes_.end(),
                                [&](const DirChange& c) { return c.dir == dir; }),
                 changes_.end());
  return Status::ok();
}

Status FaultInjectionEnv::make_dirs(const std::string& dir) {
  std::lock_guard<std::recursive_mutex> g(mu_);
  CKPT_RETURN_IF_ERROR(tick("mkdir " + dir));
  std::vector<std::string> created;  // outermost first
  for (std::string d = dir; !d.empty() && d != "." && d != "/" && !base_->exists(d);
       d = path_dirname(d)) {
    created.insert(created.begin(), d);
  }
  CKPT_RETURN_IF_ERROR(base_->make_dirs(dir));
  for (const auto& d : created) {
    changes_.push_back({DirChange::kMkdir, path_dirname(d), d, "", std::nullopt});
  }
  return Status::ok();
}

Status FaultInjectionEnv::remove_file(const std::string& path) {
  std::lock_guard<std::recursive_mutex> g(mu_);
  CKPT_RETURN_IF_ERROR(tick("unlink " + path));
  DirChange c{DirChange::kRemove, path_dirname(path), path, "", durable_bytes(path)};
  CKPT_RETURN_IF_ERROR(base_->remove_file(path));
  dirty_.erase(path);
  synced_.erase(path);
  changes_.push_back(std::move(c));
  return Status::ok();
}

Status FaultInjectionEnv::remove_dir(const std::string& dir) {
  std::lock_guard<std::recursive_mutex> g(mu_);
  CKPT_RETURN_IF_ERROR(tick("rmdir " + dir));
  CKPT_RETURN_IF_ERROR(base_->remove_dir(dir));
  changes_.push_back({DirChange::kRemoveDir, path_dirname(dir), dir, "", std::nullopt});
  return Status::ok();
}

// One change per entry, deepest first, so that each can be undone alone.
Status FaultInjectionEnv::remove_tree(const std::string& dir) {
  std::lock_guard<std::recursive_mutex> g(mu_);
  CKPT_ASSIGN_OR_RETURN(auto names, base_->list_dir(dir));
  for (const auto& n : names) {
    const std::string p = path_join(dir, n);
    CKPT_ASSIGN_OR_RETURN(FileKind kind, base_->entry_kind(p));
    if (kind == FileKind::kDirectory) {
      CKPT_RETURN_IF_ERROR(remove_tree(p));
    } else if (kind != FileKind::kMissing) {
      CKPT_RETURN_IF_ERROR(remove_file(p));
    }
  }
  return remove_dir(dir);
}

Status FaultInjectionEnv::undo(const DirChange& c) {
  // The directory itself is gone, durably (its removal from its parent was synced): so is
  // everything that was in it.
  if (!base_->is_dir(c.dir)) return Status::ok();
  auto write = [&](const std::string& path, const std::string& bytes) -> Status {
    CKPT_ASSIGN_OR_RETURN(auto f, base_->new_writable(path));
    CKPT_RETURN_IF_ERROR(f->append(bytes.data(), bytes.size()));
    return f->close();
  };
  switch (c.kind) {
    case DirChange::kCreate:
      return base_->exists(c.path) ? base_->remove_file(c.path) : Status::ok();
    case DirChange::kMkdir:
      return base_->is_dir(c.path) ? base_->remove_tree(c.path) : Status::ok();
    case DirChange::kRename:
      if (base_->exists(c.path)) {
        // Moved out of a directory whose removal is durable: the entry went with it (lost).
        if (!base_->is_dir(path_dirname(c.from))) {
          CKPT_RETURN_IF_ERROR(base_->remove_file(c.path));
        } else {
          CKPT_RETURN_IF_ERROR(base_->rename(c.path, c.from));
        }
      }
      return c.old_bytes ? write(c.path, *c.old_bytes) : Status::ok();
    case DirChange::kRemove:
      return write(c.path, c.old_bytes.value_or(""));
    case DirChange::kRemoveDir:
      return base_->make_dirs(c.path);
    case DirChange::kExchange:
      return base_->exists(c.path) && base_->exists(c.from) ? base_->exchange(c.path, c.from)
                                                            : Status::ok();
  }
  return Status::ok();
}

Status FaultInjectionEnv::drop_unsynced(CrashLoss loss) {
  std::lock_guard<std::recursive_mutex> g(mu_);
  for (const auto& [path, bytes] : dirty_) {
    if (!base_->exists(path)) continue;
    CKPT_ASSIGN_OR_RETURN(auto f, base_->new_writable(path));
    CKPT_RETURN_IF_ERROR(f->append(bytes.data(), bytes.size()));
    CKPT_RETURN_IF_ERROR(f->close());
  }
  if (loss == CrashLoss::kDataAndEntries) {
    for (auto it = changes_.rbegin(); it != changes_.rend(); ++it) {
      CKPT_RETURN_IF_ERROR(undo(*it).with_context("drop_unsynced"));
    }
  }
  dirty_.clear();
  synced_.clear();
  changes_.clear();
  fail_at_ = 0;
  return Status::ok();
}

}  // namespace ckpt
