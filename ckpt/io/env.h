// Env: every byte ckpt moves to or from disk goes through this interface, so tests can inject
// faults (FaultInjectionEnv) and the save/restore code never calls the OS directly.
//
// PosixEnv is the real one. Files are owned by the unique_ptr that opened them; closing happens in
// the destructor (errors there are swallowed, so call close() when you care). One file object must
// not be used by two threads at once, except RandomAccessFile::read_at, which is thread-safe.
// HDF5 writes its own structural bytes through its own driver; the tensor bytes, manifests, commit
// records, LATEST and the journal go through Env.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ckpt/base/status.h"

namespace ckpt {

// One source of a gathered write (WritableFile::write_gather_at).
struct WriteSpan {
  const void* src = nullptr;
  size_t nbytes = 0;
};

class WritableFile {
 public:
  virtual ~WritableFile() = default;
  // Appends at the end of what was written so far.
  virtual Status append(const void* data, size_t n) = 0;
  // Writes at an absolute offset (used to fill pre-allocated tensor extents).
  virtual Status write_at(uint64_t offset, const void* data, size_t n) = 0;
  // Writes the spans one after another from `offset` (many small tensors in one syscall where
  // the file system allows it: pwritev on a local file); by default one write_at each.
  virtual Status write_gather_at(uint64_t offset, const WriteSpan* spans, size_t count);
  virtual Status sync() = 0;  // fsync: data and metadata durable
  virtual Status close() = 0;
};

// How the storage under a file is best read (RandomAccessFile::read_profile). A local disk has no
// preference (zeros): the restore pipeline's defaults suit it. An object store answers each
// request after a round trip, so it wants many large reads in flight, and a second read of the
// same bytes costs a second download (there is no page cache to serve it).
struct ReadProfile {
  unsigned parallel_reads = 0;  // reads to keep in flight; 0 = no preference
  uint64_t read_bytes = 0;      // smallest read worth one request; 0 = no preference
  bool remote = false;          // a re-read goes over the network again
};

// One destination of a scattered read (RandomAccessFile::read_scatter_at).
struct ReadSpan {
  void* dst = nullptr;
  size_t nbytes = 0;
};

class RandomAccessFile {
 public:
  virtual ~RandomAccessFile() = default;
  // Reads exactly n bytes at offset into dst; a short read is a kCorrupt "truncated" error.
  virtual Status read_at(uint64_t offset, void* dst, size_t n) const = 0;
  // Reads the consecutive bytes at offset into `spans` in order (span k gets the nbytes after
  // span k-1's), as read_at would: a short read is kCorrupt "truncated", and the range is
  // checked before anything is read. POSIX files do it with preadv (one system call for many
  // small tensors, no staging copy); the default calls read_at once per span. Thread-safe.
  virtual Status read_scatter_at(uint64_t offset, const ReadSpan* spans, size_t count) const;
  // As read_scatter_at, for bytes the caller does not read again soon (a restore's unhashed copy
  // straight into its destinations): where the file copies the bytes itself (cached pages through
  // a mapping, a ReadCache's blocks), large spans go with non-temporal stores
  // (ckpt/base/stream_copy.h), a third less memory traffic. By default read_scatter_at.
  virtual Status read_scatter_streaming(uint64_t offset, const ReadSpan* spans,
                                        size_t count) const {
    return read_scatter_at(offset, spans, count);
  }
  virtual uint64_t size() const = 0;
  virtual const std::string& path() const = 0;
  // What identifies this version of the file's contents — for POSIX files device, inode, size,
  // mtime and ctime from fstat — so a reader can tell that the file was written to between two
  // reads. Empty when unknown (in-memory files, which nothing else writes).
  virtual std::string version() const { return {}; }
  virtual ReadProfile read_profile() const { return {}; }
  // Calls visit(bytes, n, arg) with the file's bytes [offset, offset + n) where they already lie,
  // without a copy, when this file can: a local file whose bytes are in the page cache
  // (mapped_file.h). True when it did; false when it cannot (the caller reads instead, with
  // read_at, which also reports a range outside the file); kCorrupt "truncated" when the file
  // shrank underneath and cut visit short. visit must only read the bytes and write plain
  // memory: it may stop anywhere (mapped_file.h guard_sigbus). Thread-safe.
  // A ByteVisitor may be called more than once for one range: with consecutive parts of it, in
  // order, each once (a file that receives its bytes in parts shows each as it lands).
  using ByteVisitor = void (*)(const unsigned char* bytes, size_t n, void* arg);
  virtual Result<bool> visit_at(uint64_t /*offset*/, size_t /*n*/, ByteVisitor /*visit*/,
                                void* /*arg*/) const {
    return false;
  }
  // As read_at, and shows dst's bytes to visit as they arrive, each part once it holds the
  // file's bytes. A file whose bytes arrive in parts (an object store's GET: a callback per
  // socket read) shows each part as it lands, while it is still in cache, and a retried request
  // goes on from where the last one stopped, so a part shown is never written again. By default
  // read_at, then the whole range shown once. On an error, the parts shown so far stay shown.
  virtual Status read_visiting(uint64_t offset, void* dst, size_t n, ByteVisitor visit,
                               void* arg) const;

  // Reads exactly `len` bytes at `offset` as a string; the range is checked against size() before
  // anything is allocated, so a hostile length costs nothing.
  Result<std::string> read_string(uint64_t offset, size_t len) const;
  // Bytes delivered by successful reads so far: lets tests prove that a metadata-only audit
  // touches only what it asks for. Advisory when the file is shared by threads.
  uint64_t bytes_read() const { return bytes_read_.load(std::memory_order_relaxed); }

 protected:
  void count_read(size_t n) const { bytes_read_.fetch_add(n, std::memory_order_relaxed); }

 private:
  mutable std::atomic<uint64_t> bytes_read_{0};
};

// What lstat says a directory entry is; links are never followed.
enum class FileKind { kMissing, kRegular, kDirectory, kSymlink, kOther };

// An exclusive, advisory lock held for the object's lifetime (and released by the kernel when
// the process dies).
class FileLock {
 public:
  virtual ~FileLock() = default;
  // Whether `path` (the lock file's own path) still names the file this lock holds: false once
  // it was removed or replaced (its directory deleted and made again), when another process can
  // take a fresh lock there. Its owner must stop writing then.
  virtual bool still_at(const std::string& path) const = 0;
  // When still_at() is false, why, if the lock knows better than "removed or replaced" (a lease
  // on an object store that another writer took over). Empty otherwise.
  virtual std::string lost_reason() const { return {}; }
};

// A read-only "file" over bytes held in memory (fuzzers, unit tests, an item nested in a byte
// range of another file). `name` is what path() and error messages say.
std::unique_ptr<RandomAccessFile> memory_file(std::string name, std::string bytes);

// True when [offset, offset+len) lies inside [0, size), computed without overflow.
inline bool range_inside(uint64_t offset, uint64_t len, uint64_t size) {
  return offset <= size && len <= size - offset;
}

// What an Env over an object store (S3) offers store/ beyond the file calls: a store has no
// rename, no directories and no flock, but it has conditional writes (docs/format.md §9). Every
// object appears whole when the write that makes it returns, so store/ writes final names
// directly and commits with put_if_absent.
class ObjectStore {
 public:
  virtual ~ObjectStore() = default;
  // Creates `path` with `bytes` unless it exists (S3 If-None-Match: *). false: it existed (412);
  // nothing was written.
  virtual Result<bool> put_if_absent(const std::string& path, const std::string& bytes) = 0;
  // Like Env::new_writable, but close() makes the object only if none of that name exists then
  // (If-None-Match: * on the upload's completion): else it fails with kLocked, "… exists", and
  // the object already there is untouched. For files a second writer must never replace.
  virtual Result<std::unique_ptr<WritableFile>> new_exclusive(const std::string& path) = 0;
  // The object's bytes (at most max_bytes, kCorrupt beyond) and its version (the ETag);
  // kNotFound when it does not exist.
  struct Versioned {
    std::string bytes;
    std::string version;
  };
  virtual Result<Versioned> get_versioned(const std::string& path, uint64_t max_bytes) = 0;
  // Replaces `path` only while its version is still `version` (S3 If-Match). false: it changed
  // (412); nothing was written.
  virtual Result<bool> put_if_version(const std::string& path, const std::string& bytes,
                                      const std::string& version) = 0;
  // Deletes the objects (a missing one is not an error), in batches (S3 DeleteObjects).
  virtual Status delete_many(const std::vector<std::string>& paths) = 0;
  // Aborts every unfinished multipart upload under `prefix` (a killed writer's leftovers);
  // returns how many.
  virtual Result<size_t> abort_uploads_under(const std::string& prefix) = 0;
  // A local directory for what HDF5 must see as a file (a rank file's structure while it is
  // written, a read view of one): it holds only structural bytes, never a checkpoint's tensors.
  virtual const std::string& scratch_dir() const = 0;
  // "s3://bucket (endpoint http://127.0.0.1:8333)": what error messages name. No secret.
  virtual std::string describe() const = 0;
};

class Env {
 public:
  virtual ~Env() = default;
  static Env* posix();  // process-wide, never destroyed
  // The same files, with open_for_direct_update available: rank files' tensor bodies then go to
  // the disk with O_DIRECT, bypassing the page cache. Not the default because on the shared
  // virtual disk of the development machine the page-cache path measured as fast or faster
  // (README, Performance); on local NVMe, or to keep a checkpoint out of the page cache, pass it
  // as the Env.
  static Env* posix_direct_io();
  // Non-null when `path` lives on an object store (see ObjectStore); the paths such an Env takes
  // are URLs ("s3://bucket/run/step-000000000005/COMMIT.json") and path_join works on them. A path
  // argument, because one Env may route (ckpt/io/location.h: local paths and URLs alike).
  virtual ObjectStore* object_store(const std::string& path) {
    (void)path;
    return nullptr;
  }

  virtual Result<std::unique_ptr<WritableFile>> new_writable(const std::string& path) = 0;
  // Opens an existing file for writing in place (offsets), without truncating it.
  virtual Result<std::unique_ptr<WritableFile>> open_for_update(const std::string& path) = 0;
  virtual Result<std::unique_ptr<WritableFile>> open_append(const std::string& path) = 0;
  // Like open_for_update, but the writes bypass the page cache (O_DIRECT): every write_at's
  // offset, length and source address must be multiples of kDirectIoAlignment, and nothing is
  // durable before sync() of some handle of the file. kUnsupported where this Env or the
  // filesystem cannot (the default, and Env::posix()): callers then use open_for_update.
  static constexpr size_t kDirectIoAlignment = 4096;
  virtual Result<std::unique_ptr<WritableFile>> open_for_direct_update(const std::string& path) {
    return unsupported(path + ": direct I/O is not available through this Env");
  }
  virtual Result<std::unique_ptr<RandomAccessFile>> open_random(const std::string& path) = 0;
  virtual Status rename(const std::string& from, const std::string& to) = 0;
  // Swaps two existing directory entries atomically (renameat2 RENAME_EXCHANGE): a crash leaves
  // either both as they were or both swapped. kUnsupported where the filesystem cannot.
  virtual Status exchange(const std::string& a, const std::string& b) = 0;
  virtual Status sync_dir(const std::string& dir) = 0;
  virtual Status make_dirs(const std::string& dir) = 0;
  virtual Status remove_file(const std::string& path) = 0;
  // Removes `dir` and everything under it; symbolic links inside are unlinked, never followed.
  virtual Status remove_tree(const std::string& dir) = 0;
  // Removes an empty directory.
  virtual Status remove_dir(const std::string& dir) = 0;
  // lstat: what `path` itself is (a symlink is kSymlink, whatever it points at).
  virtual Result<FileKind> entry_kind(const std::string& path) = 0;
  // Takes an exclusive lock on `path` (created if needed) without waiting and writes `owner`
  // into it. When another holder has it: a kLocked "locked by <that holder's owner text>".
  virtual Result<std::unique_ptr<FileLock>> lock_file(const std::string& path,
                                                      const std::string& owner) = 0;
  virtual bool exists(const std::string& path) = 0;
  virtual bool is_dir(const std::string& path) = 0;
  virtual Result<uint64_t> file_size(const std::string& path) = 0;
  // Entry names (not paths), sorted; "." and ".." excluded.
  virtual Result<std::vector<std::string>> list_dir(const std::string& dir) = 0;
  // list_dir for walkers that treat an unreadable directory as an empty one.
  std::vector<std::string> list_dir_or_empty(const std::string& dir);

  // Whole-file helpers built on the primitives above. read_all: kCorrupt beyond max_bytes
  // (nothing allocated); an object store does it with one GET (read_whole, no HEAD first).
  Result<std::string> read_all(const std::string& path, uint64_t max_bytes = 256u << 20) {
    return read_whole(path, max_bytes);
  }
  // Writes `path` atomically: path.tmp, fsync, rename, fsync the directory (an object store: one
  // PUT, which is atomic by itself).
  virtual Status write_atomic(const std::string& path, const std::string& contents);

 protected:
  // read_all's work: open_random, then one read.
  virtual Result<std::string> read_whole(const std::string& path, uint64_t max_bytes);
};

// Writes `contents` to a new file at `path` and syncs it (no rename); a failed write leaves no
// file behind (a full disk). Env::write_atomic's first half, for callers that rename later.
Status write_synced(Env* env, const std::string& path, const std::string& contents);

// Joins two path pieces with one '/'.
std::string path_join(const std::string& a, const std::string& b);
std::string path_dirname(const std::string& p);
std::string path_basename(const std::string& p);

}  // namespace ckpt
