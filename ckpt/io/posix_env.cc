// PosixEnv: Env over open/pread/pwrite/fsync/rename. Every error names the path and errno text.
#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <climits>
#include <cstring>
#include <mutex>

#include "ckpt/base/stream_copy.h"
#include "ckpt/io/env.h"
#include "ckpt/io/mapped_file.h"

namespace ckpt {
namespace {

Status errno_status(const std::string& what, const std::string& path) {
  int e = errno;
  std::string msg = path + ": " + what + " failed: " + std::strerror(e);
  if (e == ENOENT) return not_found(msg);
  return io_error(msg);
}

void* span_base(const ReadSpan& s) { return s.dst; }
void* span_base(const WriteSpan& s) { return const_cast<void*>(s.src); }

// Moves the spans' bytes with `io` (preadv or pwritev at an offset) in batches of at most
// IOV_MAX iovecs, a partial transfer resumed inside the span it stopped in, EINTR retried.
// 1 when every byte moved; -1 on an error (errno set); 0 when `io` moved nothing with bytes left
// (the end of the file, for a read).
template <typename Span, typename Io>
int move_spans(const Span* spans, size_t count, uint64_t offset, Io io) {
  constexpr size_t kBatch = IOV_MAX < 1024 ? IOV_MAX : 1024;
  std::array<struct iovec, kBatch> iov;
  uint64_t left = 0;
  for (size_t j = 0; j < count; ++j) left += spans[j].nbytes;
  size_t k = 0, done_in = 0;  // the first span not moved completely; its bytes moved
  while (left > 0) {
    size_t n = 0;
    for (size_t j = k; j < count && n < kBatch; ++j, ++n) {
      const size_t skip = j == k ? done_in : 0;
      iov[n].iov_base = static_cast<char*>(span_base(spans[j])) + skip;
      iov[n].iov_len = spans[j].nbytes - skip;
    }
    const ssize_t r = io(iov.data(), static_cast<int>(n), static_cast<off_t>(offset));
    if (r < 0) {
      if (errno == EINTR) continue;
      return -1;
    }
    if (r == 0) return 0;
    offset += static_cast<uint64_t>(r);
    left -= static_cast<uint64_t>(r);
    for (size_t got = static_cast<size_t>(r); k < count;) {
      const size_t rest = spans[k].nbytes - done_in;
      if (got < rest) {
        done_in += got;
        break;
      }
      got -= rest;
      done_in = 0;
      ++k;
    }
  }
  return 1;
}

class PosixWritable final : public WritableFile {
 public:
  PosixWritable(int fd, std::string path, uint64_t end)
      : fd_(fd), path_(std::move(path)), end_(end) {}
  ~PosixWritable() override {
    if (fd_ >= 0) ::close(fd_);
  }
  Status append(const void* data, size_t n) override {
    CKPT_RETURN_IF_ERROR(write_at(end_, data, n));
    return Status::ok();
  }
  Status write_at(uint64_t offset, const void* data, size_t n) override {
    const char* p = static_cast<const char*>(data);
    while (n > 0) {
      ssize_t w = ::pwrite(fd_, p, std::min<size_t>(n, 1u << 30), static_cast<off_t>(offset));
      if (w < 0) {
        if (errno == EINTR) continue;
        return errno_status("write", path_);
      }
      p += w;
      n -= static_cast<size_t>(w);
      offset += static_cast<uint64_t>(w);
    }
    end_ = std::max(end_, offset);
    return Status::ok();
  }
  // pwritev in batches (move_spans).
  Status write_gather_at(uint64_t offset, const WriteSpan* spans, size_t count) override {
    const int fd = fd_;
    const int r = move_spans(spans, count, offset, [fd](const iovec* v, int n, off_t at) {
      return ::pwritev(fd, v, n, at);
    });
    if (r < 0) return errno_status("write", path_);
    if (r == 0) return io_error(path_ + ": write wrote nothing");
    uint64_t total = 0;
    for (size_t k = 0; k < count; ++k) total += spans[k].nbytes;
    end_ = std::max(end_, offset + total);
    return Status::ok();
  }
  Status sync() override {
    if (::fdatasync(fd_) != 0) return errno_status("fsync", path_);
    return Status::ok();
  }
  Status close() override {
    int fd = fd_;
    fd_ = -1;
    if (fd >= 0 && ::close(fd) != 0) return errno_status("close", path_);
    return Status::ok();
  }

 private:
  int fd_;
  std::string path_;
  uint64_t end_;
};

// The spans' bytes copied out of a mapping, one after another (under guard_sigbus); streamed
// (stream_copy) for bytes the caller does not read next.
struct MappedCopy {
  const unsigned char* src;
  const ReadSpan* spans;
  size_t count;
  bool streaming;
  static void run(void* arg) {
    const auto* c = static_cast<const MappedCopy*>(arg);
    const unsigned char* from = c->src;
    for (size_t k = 0; k < c->count; ++k) {
      if (c->spans[k].nbytes == 0) continue;  // may have no memory at all (a null dst)
      if (c->streaming) {
        stream_copy(c->spans[k].dst, from, c->spans[k].nbytes);
      } else {
        std::memcpy(c->spans[k].dst, from, c->spans[k].nbytes);
      }
      from += c->spans[k].nbytes;
    }
  }
};

struct MappedVisit {
  const unsigned char* bytes;
  size_t n;
  RandomAccessFile::ByteVisitor visit;
  void* arg;
  static void run(void* arg) {
    const auto* v = static_cast<const MappedVisit*>(arg);
    v->visit(v->bytes, v->n, v->arg);
  }
};

// Reads of bytes the page cache holds go through a mapping of the file where that is faster
// (mapped_file.h); the rest, and every read below kMappedRead, with pread.
class PosixRandom final : public RandomAccessFile {
 public:
  PosixRandom(int fd, std::string path, uint64_t size)
      : fd_(fd), path_(std::move(path)), size_(size) {}
  ~PosixRandom() override {
    mapping_.reset();
    ::close(fd_);
  }
  Status read_at(uint64_t offset, void* dst, size_t n) const override {
    if (offset > size_ || n > size_ - offset) {
      return corrupt(path_ + ": truncated: need bytes [" + std::to_string(offset) + ", " +
                     std::to_string(offset + n) + ") but the file has " + std::to_string(size_));
    }
    if (const FileMapping* m = cached(offset, n)) {
      const ReadSpan span{dst, n};
      return copy_mapped(*m, offset, &span, 1, n, false);
    }
    char* p = static_cast<char*>(dst);
    while (n > 0) {
      ssize_t r = ::pread(fd_, p, std::min<size_t>(n, 1u << 30), static_cast<off_t>(offset));
      if (r < 0) {
        if (errno == EINTR) continue;
        return errno_status("read", path_);
      }
      if (r == 0) return corrupt(path_ + ": truncated: unexpected end of file");
      p += r;
      n -= static_cast<size_t>(r);
      offset += static_cast<uint64_t>(r);
      count_read(static_cast<size_t>(r));
    }
    return Status::ok();
  }
  // In parts of kVisitPart, each shown once it is in dst, while it is still in cache.
  Status read_visiting(uint64_t offset, void* dst, size_t n, ByteVisitor visit,
                       void* arg) const override {
    auto* bytes = static_cast<unsigned char*>(dst);
    for (size_t at = 0; at < n;) {
      const size_t part = std::min<size_t>(kVisitPart, n - at);
      CKPT_RETURN_IF_ERROR(read_at(offset + at, bytes + at, part));
      visit(bytes + at, part, arg);
      at += part;
    }
    return Status::ok();
  }
  Status read_scatter_at(uint64_t offset, const ReadSpan* spans, size_t count) const override {
    return scatter(offset, spans, count, false);
  }
  Status read_scatter_streaming(uint64_t offset, const ReadSpan* spans,
                                size_t count) const override {
    return scatter(offset, spans, count, true);
  }
  Result<bool> visit_at(uint64_t offset, size_t n, ByteVisitor visit, void* arg) const override {
    if (offset > size_ || n > size_ - offset) return false;  // read_at says what is wrong
    const FileMapping* m = cached(offset, n);
    if (m == nullptr) return false;
    MappedVisit v{m->data() + offset, n, visit, arg};
    if (!guard_sigbus(&MappedVisit::run, &v)) return shrank();
    count_read(n);
    return true;
  }
  uint64_t size() const override { return size_; }
  const std::string& path() const override { return path_; }
  std::string version() const override {
    struct stat st;
    if (::fstat(fd_, &st) != 0) return {};  // unknown; fstat of an open descriptor never fails
    return std::to_string(st.st_dev) + ":" + std::to_string(st.st_ino) + ":" +
           std::to_string(st.st_size) + ":" + std::to_string(st.st_mtim.tv_sec) + "." +
           std::to_string(st.st_mtim.tv_nsec) + ":" + std::to_string(st.st_ctim.tv_sec) + "." +
           std::to_string(st.st_ctim.tv_nsec);
  }

 private:
  static constexpr uint64_t kMappedRead = 64u << 10;  // below it, one pread costs less
  static constexpr size_t kVisitPart = 256u << 10;    // read_visiting: fits in L2 with its hash

  // preadv in batches (move_spans), or copies out of the mapping.
  Status scatter(uint64_t offset, const ReadSpan* spans, size_t count, bool streaming) const {
    uint64_t total = 0;
    for (size_t k = 0; k < count; ++k) total += spans[k].nbytes;
    if (offset > size_ || total > size_ - offset) {
      return corrupt(path_ + ": truncated: need bytes [" + std::to_string(offset) + ", " +
                     std::to_string(offset + total) + ") but the file has " +
                     std::to_string(size_));
    }
    if (const FileMapping* m = cached(offset, total)) {
      return copy_mapped(*m, offset, spans, count, total, streaming);
    }
    const int fd = fd_;
    const int r = move_spans(spans, count, offset, [fd](const iovec* v, int n, off_t at) {
      return ::preadv(fd, v, n, at);
    });
    if (r < 0) return errno_status("read", path_);
    if (r == 0 && total > 0) return corrupt(path_ + ": truncated: unexpected end of file");
    count_read(static_cast<size_t>(total));
    return Status::ok();
  }

  // The file's mapping when [offset, offset + n) is worth reading through it and all in the
  // page cache; null: pread. Mapped at the first such read (mapped_file.h decides whether).
  const FileMapping* cached(uint64_t offset, uint64_t n) const {
    if (n < kMappedRead) return nullptr;
    std::call_once(map_once_, [this] { mapping_ = FileMapping::open(fd_, size_); });
    if (mapping_ == nullptr || !mapping_->resident(offset, n)) return nullptr;
    return mapping_.get();
  }
  // The spans' `total` bytes at `offset`, copied out of the mapping under guard_sigbus.
  Status copy_mapped(const FileMapping& m, uint64_t offset, const ReadSpan* spans, size_t count,
                     uint64_t total, bool streaming) const {
    MappedCopy copy{m.data() + offset, spans, count, streaming};
    if (!guard_sigbus(&MappedCopy::run, &copy)) return shrank();
    count_read(static_cast<size_t>(total));
    return Status::ok();
  }
  Status shrank() const {
    return corrupt(path_ + ": truncated: the file shrank while it was read (it had " +
                   std::to_string(size_) + " bytes when opened)");
  }

  int fd_;
  std::string path_;
  uint64_t size_;
  mutable std::once_flag map_once_;
  mutable std::unique_ptr<FileMapping> mapping_;
};

// A flock belongs to the open file description, which fork() shares with the child: a
// DataLoader worker forked from the trainer would keep RUN/LOCK locked after the trainer died
// (O_CLOEXEC only helps an exec). So the child drops its copy at fork (pthread_atfork): each
// held lock's descriptor is replaced, in the child, by one on /dev/null (dup3, which closes the
// child's reference without unlocking — LOCK_UN would unlock the parent's too), and the lock
// dies with the process that took it. The fds sit in a fixed table of atomics because the child
// handler must not take a mutex another thread may have held at the fork.
class ForkGuard {
 public:
  static ForkGuard& get() {
    static ForkGuard* g = new ForkGuard();  // never destroyed: a fork may come at exit
    return *g;
  }
  bool add(int fd) {
    for (auto& slot : slots_) {
      int free = -1;
      if (slot.compare_exchange_strong(free, fd)) return true;
    }
    return false;
  }
  void remove(int fd) {
    for (auto& slot : slots_) {
      int held = fd;
      if (slot.compare_exchange_strong(held, -1)) return;
    }
  }

 private:
  ForkGuard() {
    for (auto& slot : slots_) slot.store(-1);
    devnull_ = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    pthread_atfork(nullptr, nullptr, &ForkGuard::in_child);
  }
  static void in_child() {
    ForkGuard& g = get();
    for (auto& slot : g.slots_) {
      const int fd = slot.exchange(-1);
      if (fd >= 0 && g.devnull_ >= 0) (void)::dup3(g.devnull_, fd, O_CLOEXEC);
    }
  }
  std::array<std::atomic<int>, 64> slots_;
  int devnull_ = -1;
};

class PosixLock final : public FileLock {
 public:
  explicit PosixLock(int fd) : fd_(fd) { guarded_ = ForkGuard::get().add(fd_); }
  ~PosixLock() override {
    if (guarded_) ForkGuard::get().remove(fd_);
    ::close(fd_);  // closing the last descriptor releases the flock
  }
  bool still_at(const std::string& path) const override {
    struct stat held, now;
    if (::fstat(fd_, &held) != 0 || ::stat(path.c_str(), &now) != 0) return false;
    return held.st_dev == now.st_dev && held.st_ino == now.st_ino;
  }

 private:
  int fd_;
  bool guarded_ = false;
};

class PosixEnv final : public Env {
 public:
  explicit PosixEnv(bool direct_io) : direct_io_(direct_io) {}
  Result<std::unique_ptr<WritableFile>> new_writable(const std::string& path) override {
    return open_w(path, O_WRONLY | O_CREAT | O_TRUNC, false);
  }
  Result<std::unique_ptr<WritableFile>> open_for_update(const std::string& path) override {
    return open_w(path, O_WRONLY, false);
  }
  Result<std::unique_ptr<WritableFile>> open_append(const std::string& path) override {
    return open_w(path, O_WRONLY | O_CREAT, true);
  }
  Result<std::unique_ptr<WritableFile>> open_for_direct_update(const std::string& path) override {
    if (!direct_io_) return unsupported(path + ": direct I/O is off in Env::posix()");
    int fd = ::open(path.c_str(), O_WRONLY | O_DIRECT | O_CLOEXEC);
    if (fd < 0 && errno == EINVAL) return unsupported(path + ": the filesystem refuses O_DIRECT");
    if (fd < 0) return errno_status("open for direct writing", path);
    return std::unique_ptr<WritableFile>(new PosixWritable(fd, path, 0));
  }
  Result<std::unique_ptr<RandomAccessFile>> open_random(const std::string& path) override {
    // O_NONBLOCK so that a FIFO (or a device) named like a checkpoint file cannot hang the
    // open; it has no effect on reads of regular files, the only kind accepted.
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) return errno_status("open", path);
    struct stat st;
    if (::fstat(fd, &st) != 0) {
      Status s = errno_status("stat", path);
      ::close(fd);
      return s;
    }
    if (S_ISDIR(st.st_mode)) {
      ::close(fd);
      return invalid_argument(path + ": is a directory, expected a file");
    }
    if (!S_ISREG(st.st_mode)) {
      ::close(fd);
      return corrupt(path + ": not a regular file (a FIFO, socket or device is never read)");
    }
    // Readers of checkpoints go through a file mostly front to back (the restore pipeline's
    // workers take its units in offset order): a larger readahead window serves them from a
    // cold cache faster. Advice only; its failure changes nothing.
    (void)::posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
    return std::unique_ptr<RandomAccessFile>(
        new PosixRandom(fd, path, static_cast<uint64_t>(st.st_size)));
  }
  Status rename(const std::string& from, const std::string& to) override {
    if (::rename(from.c_str(), to.c_str()) != 0) return errno_status("rename to " + to, from);
    return Status::ok();
  }
  Status exchange(const std::string& a, const std::string& b) override {
#ifdef SYS_renameat2
    constexpr unsigned kRenameExchange = 1u << 1;  // RENAME_EXCHANGE, <linux/fs.h>
    if (::syscall(SYS_renameat2, AT_FDCWD, a.c_str(), AT_FDCWD, b.c_str(), kRenameExchange) == 0) {
      return Status::ok();
    }
    if (errno != EINVAL && errno != ENOSYS) return errno_status("exchange with " + b, a);
#endif
    return unsupported(a + ": the filesystem cannot exchange it with " + b +
                       " atomically (renameat2 RENAME_EXCHANGE)");
  }
  Status sync_dir(const std::string& dir) override {
    int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return errno_status("open directory", dir);
    int rc = ::fsync(fd);
    ::close(fd);
    if (rc != 0) return errno_status("fsync directory", dir);
    return Status::ok();
  }
  Status make_dirs(const std::string& dir) override {
    if (dir.empty() || is_dir(dir)) return Status::ok();
    std::string parent = path_dirname(dir);
    if (parent != dir) CKPT_RETURN_IF_ERROR(make_dirs(parent));
    if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) return errno_status("mkdir", dir);
    return Status::ok();
  }
  Status remove_file(const std::string& path) override {
    if (::unlink(path.c_str()) != 0) return errno_status("unlink", path);
    return Status::ok();
  }
  Status remove_tree(const std::string& dir) override {
    CKPT_ASSIGN_OR_RETURN(auto names, list_dir(dir));
    for (const auto& n : names) {
      std::string p = path_join(dir, n);
      CKPT_ASSIGN_OR_RETURN(FileKind kind, entry_kind(p));
      if (kind == FileKind::kDirectory) {
        CKPT_RETURN_IF_ERROR(remove_tree(p));
      } else if (kind != FileKind::kMissing) {
        CKPT_RETURN_IF_ERROR(remove_file(p));  // a symlink goes, its target stays
      }
    }
    return remove_dir(dir);
  }
  Status remove_dir(const std::string& dir) override {
    if (::rmdir(dir.c_str()) != 0) return errno_status("rmdir", dir);
    return Status::ok();
  }
  Result<FileKind> entry_kind(const std::string& path) override {
    struct stat st;
    if (::lstat(path.c_str(), &st) != 0) {
      if (errno == ENOENT || errno == ENOTDIR) return FileKind::kMissing;
      return errno_status("lstat", path);
    }
    if (S_ISLNK(st.st_mode)) return FileKind::kSymlink;
    if (S_ISDIR(st.st_mode)) return FileKind::kDirectory;
    if (S_ISREG(st.st_mode)) return FileKind::kRegular;
    return FileKind::kOther;
  }
  Result<std::unique_ptr<FileLock>> lock_file(const std::string& path,
                                              const std::string& owner) override {
    int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (fd < 0) return errno_status("open lock file", path);
    if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
      Status s = errno == EWOULDBLOCK ? locked(path + ": locked by " + read_holder(fd))
                                      : errno_status("flock", path);
      ::close(fd);
      return s;
    }
    if (::ftruncate(fd, 0) != 0 ||
        ::pwrite(fd, owner.data(), owner.size(), 0) != static_cast<ssize_t>(owner.size())) {
      Status s = errno_status("write lock file", path);
      ::close(fd);
      return s;
    }
    return std::unique_ptr<FileLock>(new PosixLock(fd));
  }
  bool exists(const std::string& path) override {
    struct stat st;
    return ::stat(path.c_str(), &st) == 0;
  }
  bool is_dir(const std::string& path) override {
    struct stat st;
    return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
  }
  Result<uint64_t> file_size(const std::string& path) override {
    struct stat st;
    if (::stat(path.c_str(), &st) != 0) return errno_status("stat", path);
    return static_cast<uint64_t>(st.st_size);
  }
  Result<std::vector<std::string>> list_dir(const std::string& dir) override {
    DIR* d = ::opendir(dir.c_str());
    if (d == nullptr) return errno_status("open directory", dir);
    std::vector<std::string> names;
    while (struct dirent* e = ::readdir(d)) {
      std::string n = e->d_name;
      if (n != "." && n != "..") names.push_back(n);
    }
    ::closedir(d);
    std::sort(names.begin(), names.end());
    return names;
  }

 private:
  // The holder's owner text, for the message; it may be mid-write, so it is only a hint.
  static std::string read_holder(int fd) {
    char buf[256];
    ssize_t n = ::pread(fd, buf, sizeof buf - 1, 0);
    std::string text(buf, n > 0 ? static_cast<size_t>(n) : 0);
    while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.pop_back();
    for (char& c : text) {
      if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) >= 0x7f) c = '?';
    }
    return text.empty() ? std::string("another process") : text;
  }
  Result<std::unique_ptr<WritableFile>> open_w(const std::string& path, int flags, bool append) {
    int fd = ::open(path.c_str(), flags | O_CLOEXEC, 0644);
    if (fd < 0) return errno_status("open for writing", path);
    uint64_t end = 0;
    if (append) {
      struct stat st;
      if (::fstat(fd, &st) == 0) end = static_cast<uint64_t>(st.st_size);
    }
    return std::unique_ptr<WritableFile>(new PosixWritable(fd, path, end));
  }

  bool direct_io_;
};

}  // namespace

Env* Env::posix() {
  static Env* env = new PosixEnv(false);
  return env;
}

Env* Env::posix_direct_io() {
  static Env* env = new PosixEnv(true);
  return env;
}

}  // namespace ckpt
