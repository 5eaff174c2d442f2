#include "ckpt/io/mem_env.h"

#include <algorithm>
#include <cstring>

namespace ckpt {
namespace {

std::string strip(std::string p) {
  while (p.size() > 1 && p.back() == '/') p.pop_back();
  return p;
}

class MemWritable final : public WritableFile {
 public:
  MemWritable(std::shared_ptr<std::string> bytes, bool append)
      : bytes_(std::move(bytes)), end_(append ? bytes_->size() : 0) {}
  Status append(const void* data, size_t n) override { return write_at(end_, data, n); }
  Status write_at(uint64_t offset, const void* data, size_t n) override {
    if (bytes_->size() < offset + n) bytes_->resize(offset + n, '\0');
    if (n > 0) std::memcpy(bytes_->data() + offset, data, n);
    end_ = std::max<uint64_t>(end_, offset + n);
    return Status::ok();
  }
  Status sync() override { return Status::ok(); }
  Status close() override { return Status::ok(); }

 private:
  std::shared_ptr<std::string> bytes_;
  uint64_t end_;
};

class MemRandom final : public RandomAccessFile {
 public:
  MemRandom(std::shared_ptr<std::string> bytes, std::string path)
      : bytes_(std::move(bytes)), path_(std::move(path)), size_(bytes_->size()) {}
  Status read_at(uint64_t offset, void* dst, size_t n) const override {
    if (offset > size_ || n > size_ - offset || offset + n > bytes_->size()) {
      return corrupt(path_ + ": truncated: need bytes [" + std::to_string(offset) + ", " +
                     std::to_string(offset + n) + ") but the file has " + std::to_string(size_));
    }
    if (n > 0) std::memcpy(dst, bytes_->data() + offset, n);
    count_read(n);
    return Status::ok();
  }
  uint64_t size() const override { return size_; }
  const std::string& path() const override { return path_; }

 private:
  std::shared_ptr<std::string> bytes_;
  std::string path_;
  uint64_t size_;
};

class MemLock final : public FileLock {
 public:
  MemLock(MemEnv* env, std::string path) : env_(env), path_(std::move(path)) {}
  ~MemLock() override { env_->unlock(path_); }
  bool still_at(const std::string& path) const override { return env_->exists(path); }

 private:
  MemEnv* env_;
  std::string path_;
};

}  // namespace

bool MemEnv::parent_exists(const std::string& path) const {
  const std::string parent = path_dirname(path);
  return parent == "." || parent == "/" || dirs_.count(parent) != 0;
}

bool MemEnv::has_children(const std::string& dir) const {
  const std::string prefix = dir + "/";
  auto f = files_.lower_bound(prefix);
  if (f != files_.end() && f->first.compare(0, prefix.size(), prefix) == 0) return true;
  auto d = dirs_.lower_bound(prefix);
  return d != dirs_.end() && d->compare(0, prefix.size(), prefix) == 0;
}

Result<std::unique_ptr<WritableFile>> MemEnv::open_w(const std::string& raw, bool create,
                                                     bool truncate, bool append) {
  const std::string path = strip(raw);
  std::lock_guard<std::mutex> g(mu_);
  if (dirs_.count(path) != 0) return io_error(path + ": open for writing failed: Is a directory");
  auto it = files_.find(path);
  if (it == files_.end()) {
    if (!create || !parent_exists(path)) {
      return not_found(path + ": open for writing failed: No such file or directory");
    }
    it = files_.emplace(path, std::make_shared<std::string>()).first;
  } else if (truncate) {
    it->second->clear();
  }
  return std::unique_ptr<WritableFile>(new MemWritable(it->second, append));
}

Result<std::unique_ptr<WritableFile>> MemEnv::new_writable(const std::string& path) {
  return open_w(path, true, true, false);
}
Result<std::unique_ptr<WritableFile>> MemEnv::open_for_update(const std::string& path) {
  return open_w(path, false, false, false);
}
Result<std::unique_ptr<WritableFile>> MemEnv::open_append(const std::string& path) {
  return open_w(path, true, false, true);
}

Result<std::unique_ptr<RandomAccessFile>> MemEnv::open_random(const std::string& raw) {
  const std::string path = strip(raw);
  std::lock_guard<std::mutex> g(mu_);
  if (dirs_.count(path) != 0) return invalid_argument(path + ": is a directory, expected a file");
  auto it = files_.find(path);
  if (it == files_.end()) return not_found(path + ": open failed: No such file or directory");
  return std::unique_ptr<RandomAccessFile>(new MemRandom(it->second, path));
}

Status MemEnv::rename(const std::string& raw_from, const std::string& raw_to) {
  const std::string from = strip(raw_from), to = strip(raw_to);
  std::lock_guard<std::mutex> g(mu_);
  auto it = files_.find(from);
  if (it == files_.end()) {
    return not_found(from + ": rename to " + to + " failed: No such file or directory");
  }
  if (dirs_.count(to) != 0 || !parent_exists(to)) {
    return io_error(from + ": rename to " + to + " failed: bad target");
  }
  Bytes b = it->second;
  files_.erase(it);
  files_[to] = b;
  return Status::ok();
}

// Swaps every file and directory under `a` with those under `b` (both must exist).
Status MemEnv::exchange(const std::string& raw_a, const std::string& raw_b) {
  const std::string a = strip(raw_a), b = strip(raw_b);
  std::lock_guard<std::mutex> g(mu_);
  const bool a_dir = dirs_.count(a) != 0, b_dir = dirs_.count(b) != 0;
  if ((!a_dir && files_.count(a) == 0) || (!b_dir && files_.count(b) == 0)) {
    return not_found(a + ": exchange with " + b + " failed: No such file or directory");
  }
  auto swap_prefix = [&](const std::string& p) -> std::string {
    for (const auto& [from, to] : {std::make_pair(a, b), std::make_pair(b, a)}) {
      if (p == from) return to;
      if (p.compare(0, from.size() + 1, from + "/") == 0) return to + p.substr(from.size());
    }
    return p;
  };
  std::map<std::string, Bytes> files;
  for (auto& [p, bytes] : files_) files[swap_prefix(p)] = bytes;
  std::set<std::string> dirs;
  for (const auto& d : dirs_) dirs.insert(swap_prefix(d));
  files_ = std::move(files);
  dirs_ = std::move(dirs);
  return Status::ok();
}

Status MemEnv::sync_dir(const std::string& dir) {
  std::lock_guard<std::mutex> g(mu_);
  if (dirs_.count(strip(dir)) == 0) return not_found(dir + ": open directory failed: no such dir");
  return Status::ok();
}

Status MemEnv::make_dirs(const std::string& raw) {
  const std::string dir = strip(raw);
  if (dir.empty() || dir == "." || dir == "/") return Status::ok();
  {
    std::lock_guard<std::mutex> g(mu_);
    if (files_.count(dir) != 0) return io_error(dir + ": mkdir failed: File exists");
    if (dirs_.count(dir) != 0) return Status::ok();
  }
  const std::string parent = path_dirname(dir);
  if (parent != dir) CKPT_RETURN_IF_ERROR(make_dirs(parent));
  std::lock_guard<std::mutex> g(mu_);
  dirs_.insert(dir);
  return Status::ok();
}

Status MemEnv::remove_file(const std::string& raw) {
  std::lock_guard<std::mutex> g(mu_);
  if (files_.erase(strip(raw)) == 0) {
    return not_found(raw + ": unlink failed: No such file or directory");
  }
  return Status::ok();
}

Status MemEnv::remove_tree(const std::string& raw) {
  const std::string dir = strip(raw);
  std::lock_guard<std::mutex> g(mu_);
  if (dirs_.count(dir) == 0) return not_found(dir + ": open directory failed: no such dir");
  const std::string prefix = dir + "/";
  auto under = [&](const std::string& p) { return p.compare(0, prefix.size(), prefix) == 0; };
  for (auto it = files_.begin(); it != files_.end();)
    it = under(it->first) ? files_.erase(it) : ++it;
  for (auto it = dirs_.begin(); it != dirs_.end();) it = under(*it) ? dirs_.erase(it) : ++it;
  dirs_.erase(dir);
  return Status::ok();
}

Status MemEnv::remove_dir(const std::string& raw) {
  const std::string dir = strip(raw);
  std::lock_guard<std::mutex> g(mu_);
  if (dirs_.count(dir) == 0) return not_found(dir + ": rmdir failed: No such file or directory");
  if (has_children(dir)) return io_error(dir + ": rmdir failed: Directory not empty");
  dirs_.erase(dir);
  return Status::ok();
}

Result<FileKind> MemEnv::entry_kind(const std::string& raw) {
  const std::string path = strip(raw);
  std::lock_guard<std::mutex> g(mu_);
  if (files_.count(path) != 0) return FileKind::kRegular;
  if (dirs_.count(path) != 0) return FileKind::kDirectory;
  return FileKind::kMissing;
}

Result<std::unique_ptr<FileLock>> MemEnv::lock_file(const std::string& raw,
                                                    const std::string& owner) {
  const std::string path = strip(raw);
  {
    std::lock_guard<std::mutex> g(mu_);
    if (!parent_exists(path)) return not_found(path + ": open lock file failed: no such dir");
    if (!locked_.insert(path).second) {
      auto it = files_.find(path);
      return locked(path + ": locked by " + (it == files_.end() ? "?" : *it->second));
    }
    files_[path] = std::make_shared<std::string>(owner);
  }
  return std::unique_ptr<FileLock>(new MemLock(this, path));
}

void MemEnv::unlock(const std::string& path) {
  std::lock_guard<std::mutex> g(mu_);
  locked_.erase(path);
}

bool MemEnv::exists(const std::string& raw) {
  const std::string path = strip(raw);
  std::lock_guard<std::mutex> g(mu_);
  return files_.count(path) != 0 || dirs_.count(path) != 0;
}

bool MemEnv::is_dir(const std::string& raw) {
  std::lock_guard<std::mutex> g(mu_);
  return dirs_.count(strip(raw)) != 0;
}

Result<uint64_t> MemEnv::file_size(const std::string& raw) {
  const std::string path = strip(raw);
  std::lock_guard<std::mutex> g(mu_);
  auto it = files_.find(path);
  if (it == files_.end()) return not_found(path + ": stat failed: No such file or directory");
  return static_cast<uint64_t>(it->second->size());
}

Result<std::vector<std::string>> MemEnv::list_dir(const std::string& raw) {
  const std::string dir = strip(raw);
  std::lock_guard<std::mutex> g(mu_);
  if (dirs_.count(dir) == 0) return not_found(dir + ": open directory failed: no such dir");
  const std::string prefix = dir + "/";
  std::set<std::string> names;
  auto add = [&](const std::string& p) {
    if (p.compare(0, prefix.size(), prefix) != 0) return;
    const std::string rest = p.substr(prefix.size());
    if (!rest.empty() && rest.find('/') == std::string::npos) names.insert(rest);
  };
  for (const auto& [p, b] : files_) add(p);
  for (const auto& d : dirs_) add(d);
  return std::vector<std::string>(names.begin(), names.end());
}

}  // namespace ckpt
