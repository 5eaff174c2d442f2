// S3Env (s3_env.h): Env's calls as S3 requests.
#include "ckpt/io/s3/s3_env.h"

#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <mutex>
#include <set>
#include <thread>

#include "ckpt/base/text.h"
#include "ckpt/io/s3/s3_lease.h"
#include "ckpt/io/s3/upload.h"

namespace ckpt::s3 {
namespace {

// Whole reads at most this large are one GET; larger ones are split across config.concurrency.
constexpr uint64_t kSplitBytes = 16u << 20;
// The read a restore should issue per request (ReadProfile): large enough that the round trip is
// small against the transfer, small enough that config.concurrency of them keep the link busy.
constexpr uint64_t kReadBytes = 8u << 20;

// An object written front to back, appearing whole at close().
class S3Writable final : public WritableFile {
 public:
  S3Writable(std::unique_ptr<ObjectWriter> w, std::string path, bool exclusive = false)
      : w_(std::move(w)), path_(std::move(path)), exclusive_(exclusive) {}
  Status append(const void* data, size_t n) override {
    if (closed_) return internal_error(path_ + ": append after close");
    return w_->append(data, n);
  }
  Status write_at(uint64_t offset, const void* data, size_t n) override {
    if (offset != w_->bytes()) {
      return unsupported(path_ + ": an object is written front to back (write at " +
                         std::to_string(offset) + ", " + std::to_string(w_->bytes()) +
                         " bytes written)");
    }
    return append(data, n);
  }
  Status sync() override { return Status::ok(); }  // durable when close() returns
  Status close() override {
    if (closed_) return Status::ok();
    closed_ = true;
    Condition cond;
    cond.if_none_match = exclusive_;
    CKPT_ASSIGN_OR_RETURN(PutResult r, w_->finish(cond));
    if (r.precondition_failed && exclusive_) {
      return locked(path_ + ": exists: another writer made it while this one wrote it (kept)");
    }
    if (r.precondition_failed) return internal_error(path_ + ": unconditional write refused");
    return Status::ok();
  }

 private:
  std::unique_ptr<ObjectWriter> w_;
  std::string path_;
  bool exclusive_;
  bool closed_ = false;
};

// An append-only object (the journal): held in memory, the whole object PUT again at each
// sync() and at close(). Small files only (a journal is kilobytes).
class S3Appendable final : public WritableFile {
 public:
  S3Appendable(S3Client* c, S3Url u, std::string path, std::string bytes)
      : c_(c), u_(std::move(u)), path_(std::move(path)), bytes_(std::move(bytes)) {}
  // What was appended reaches the store, as a file's bytes reach the page cache at each write.
  ~S3Appendable() override { (void)sync(); }
  Status append(const void* data, size_t n) override {
    bytes_.append(static_cast<const char*>(data), n);
    dirty_ = true;
    return Status::ok();
  }
  Status write_at(uint64_t offset, const void* data, size_t n) override {
    if (offset != bytes_.size()) return unsupported(path_ + ": objects are appended at the end");
    return append(data, n);
  }
  Status sync() override {
    if (!dirty_) return Status::ok();
    CKPT_ASSIGN_OR_RETURN(PutResult r,
                          c_->put_object(u_.bucket, u_.key, bytes_.data(), bytes_.size()));
    (void)r;
    dirty_ = false;
    return Status::ok();
  }
  Status close() override { return sync(); }

 private:
  S3Client* c_;
  S3Url u_;
  std::string path_, bytes_;
  bool dirty_ = true;  // an empty new file is created at the first sync
};

class S3Random final : public RandomAccessFile {
 public:
  S3Random(S3Client* c, S3Url u, std::string path, ObjectInfo info)
      : c_(c), u_(std::move(u)), path_(std::move(path)), info_(std::move(info)) {}
  Status read_at(uint64_t offset, void* dst, size_t n) const override {
    CKPT_RETURN_IF_ERROR(inside(offset, n));
    if (n == 0) return Status::ok();
    const int ways = std::max(1, c_->config().concurrency);
    if (n <= kSplitBytes || ways == 1) {
      CKPT_RETURN_IF_ERROR(c_->get_range(u_.bucket, u_.key, offset, dst, n, nullptr, nullptr));
      count_read(n);
      return Status::ok();
    }
    // Parallel ranged GETs of at least kSplitBytes / 2 each.
    const size_t pieces = std::min<size_t>(ways, (n + kSplitBytes / 2 - 1) / (kSplitBytes / 2));
    const size_t each = (n + pieces - 1) / pieces;
    std::vector<Status> st(pieces);
    std::vector<std::thread> pool;
    for (size_t k = 0; k < pieces; ++k) {
      const size_t from = k * each, len = std::min(each, n - std::min(n, from));
      if (len == 0) continue;
      pool.emplace_back([&, k, from, len] {
        st[k] = c_->get_range(u_.bucket, u_.key, offset + from, static_cast<char*>(dst) + from, len,
                              nullptr, nullptr);
      });
    }
    for (auto& t : pool) t.join();
    for (const Status& s : st) CKPT_RETURN_IF_ERROR(s);
    count_read(n);
    return Status::ok();
  }
  // One GET shows its parts as they land; a read split into parallel GETs (over kSplitBytes) is
  // shown whole once it is in.
  Status read_visiting(uint64_t offset, void* dst, size_t n, ByteVisitor visit,
                       void* arg) const override {
    CKPT_RETURN_IF_ERROR(inside(offset, n));
    if (n > kSplitBytes && c_->config().concurrency > 1) {
      return RandomAccessFile::read_visiting(offset, dst, n, visit, arg);
    }
    CKPT_RETURN_IF_ERROR(c_->get_range(u_.bucket, u_.key, offset, dst, n, visit, arg));
    count_read(n);
    return Status::ok();
  }
  // One GET for the whole run of spans when it is not large (many small tensors).
  Status read_scatter_at(uint64_t offset, const ReadSpan* spans, size_t count) const override {
    uint64_t total = 0;
    for (size_t i = 0; i < count; ++i) total += spans[i].nbytes;
    if (total > kSplitBytes || count <= 1)
      return RandomAccessFile::read_scatter_at(offset, spans, count);
    std::string buf(total, '\0');
    CKPT_RETURN_IF_ERROR(read_at(offset, buf.data(), total));
    size_t at = 0;
    for (size_t i = 0; i < count; ++i) {
      if (spans[i].nbytes != 0) std::memcpy(spans[i].dst, buf.data() + at, spans[i].nbytes);
      at += spans[i].nbytes;
    }
    return Status::ok();
  }
  uint64_t size() const override { return info_.size; }
  const std::string& path() const override { return path_; }
  std::string version() const override { return info_.etag; }
  ReadProfile read_profile() const override {
    return {static_cast<unsigned>(std::max(1, c_->config().concurrency)), kReadBytes, true};
  }

 private:
  Status inside(uint64_t offset, size_t n) const {
    if (range_inside(offset, n, info_.size)) return Status::ok();
    return corrupt(path_ + ": truncated: " + std::to_string(n) + " bytes at " +
                   std::to_string(offset) + " of a " + std::to_string(info_.size) + "-byte object");
  }

  S3Client* c_;
  S3Url u_;
  std::string path_;
  ObjectInfo info_;
};

std::string base_name(const std::string& key) {
  const size_t slash = key.find_last_of('/');
  return slash == std::string::npos ? key : key.substr(slash + 1);
}

class S3EnvImpl final : public Env, public ObjectStore {
 public:
  S3EnvImpl(std::unique_ptr<S3Client> client, std::string scratch, LeaseOptions lease)
      : client_(std::move(client)), scratch_(std::move(scratch)), lease_(lease) {}

  S3Client* client() { return client_.get(); }
  ObjectStore* object_store(const std::string& path) override {
    (void)path;
    return this;
  }

  // --- files ---------------------------------------------------------------------------------
  Result<std::unique_ptr<WritableFile>> new_writable(const std::string& p) override {
    CKPT_ASSIGN_OR_RETURN(S3Url u, for_write(p));
    return std::unique_ptr<WritableFile>(
        new S3Writable(ObjectWriter::create(client_.get(), u.bucket, u.key), p));
  }
  Result<std::unique_ptr<WritableFile>> open_for_update(const std::string& p) override {
    return unsupported(p + ": an object cannot be updated in place");
  }
  Result<std::unique_ptr<WritableFile>> open_append(const std::string& p) override {
    CKPT_ASSIGN_OR_RETURN(S3Url u, for_write(p));
    std::string bytes;
    auto got = client_->get_object(u.bucket, u.key, 64u << 20);
    if (got.is_ok()) {
      bytes = std::move(*got);
    } else if (got.status().code() != Code::kNotFound) {
      return got.status();
    }
    return std::unique_ptr<WritableFile>(
        new S3Appendable(client_.get(), std::move(u), p, std::move(bytes)));
  }
  Result<std::unique_ptr<RandomAccessFile>> open_random(const std::string& p) override {
    CKPT_ASSIGN_OR_RETURN(S3Url u, parse_s3_url(p));
    CKPT_ASSIGN_OR_RETURN(ObjectInfo info, client_->head_object(u.bucket, u.key));
    return std::unique_ptr<RandomAccessFile>(new S3Random(client_.get(), u, p, info));
  }
  Status write_atomic(const std::string& p, const std::string& c) override {
    CKPT_ASSIGN_OR_RETURN(S3Url u, for_write(p));
    CKPT_ASSIGN_OR_RETURN(PutResult r, client_->put_object(u.bucket, u.key, c.data(), c.size()));
    (void)r;
    return Status::ok();
  }
  Status rename(const std::string& from, const std::string& to) override {
    return unsupported(from + " -> " + to + ": an object store has no rename");
  }
  Status exchange(const std::string& a, const std::string& b) override {
    return unsupported(a + " <-> " + b + ": an object store cannot exchange directories");
  }
  Status sync_dir(const std::string&) override { return Status::ok(); }
  Status make_dirs(const std::string& d) override { return parse_s3_url(d).status(); }
  Status remove_file(const std::string& p) override {
    CKPT_ASSIGN_OR_RETURN(S3Url u, parse_s3_url(p));
    return client_->delete_objects(u.bucket, {u.key});
  }
  // The commit record first (a checkpoint stops being one before its data goes), then the rest.
  Status remove_tree(const std::string& d) override {
    CKPT_ASSIGN_OR_RETURN(S3Url u, parse_s3_url(d));
    CKPT_ASSIGN_OR_RETURN(ListResult all, client_->list(u.bucket, dir_prefix(u.key), ""));
    std::vector<std::string> first, rest;
    for (const ListEntry& e : all.objects) {
      (base_name(e.key) == "COMMIT.json" ? first : rest).push_back(e.key);
    }
    if (!first.empty()) CKPT_RETURN_IF_ERROR(client_->delete_objects(u.bucket, first));
    // The "directory" itself too: stores built on a file tree (SeaweedFS) keep an emptied
    // folder listed as a prefix until its own key "dir/" is deleted; on S3 that key is absent.
    std::set<std::string> folders{dir_prefix(u.key)};
    for (const ListEntry& e : all.objects) {
      for (size_t slash = e.key.find('/', folders.begin()->size()); slash != std::string::npos;
           slash = e.key.find('/', slash + 1)) {
        folders.insert(e.key.substr(0, slash + 1));
      }
    }
    // Deepest first: a folder goes once it is empty.
    for (auto it = folders.rbegin(); it != folders.rend(); ++it) rest.push_back(*it);
    return client_->delete_objects(u.bucket, rest);
  }
  // The folder key of a store built on a file tree (see remove_tree); nothing on S3.
  Status remove_dir(const std::string& d) override {
    CKPT_ASSIGN_OR_RETURN(S3Url u, parse_s3_url(d));
    return client_->delete_objects(u.bucket, {dir_prefix(u.key)});
  }
  Result<FileKind> entry_kind(const std::string& p) override {
    CKPT_ASSIGN_OR_RETURN(S3Url u, parse_s3_url(p));
    if (!u.key.empty()) {
      auto h = client_->head_object(u.bucket, u.key);
      if (h.is_ok()) return FileKind::kRegular;
      if (h.status().code() != Code::kNotFound) return h.status();
    }
    CKPT_ASSIGN_OR_RETURN(bool any, has_children(u));
    return any ? FileKind::kDirectory : FileKind::kMissing;
  }
  Result<std::unique_ptr<FileLock>> lock_file(const std::string& p,
                                              const std::string& owner) override {
    CKPT_ASSIGN_OR_RETURN(S3Url u, for_write(p));
    return take_lease(client_.get(), u, p, owner, lease_);
  }
  bool exists(const std::string& p) override {
    auto k = entry_kind(p);
    return k.is_ok() && *k != FileKind::kMissing;
  }
  bool is_dir(const std::string& p) override {
    auto u = parse_s3_url(p);
    if (!u.is_ok()) return false;
    auto any = has_children(*u);
    return any.is_ok() && *any;
  }
  Result<std::string> read_whole(const std::string& p, uint64_t max_bytes) override {
    CKPT_ASSIGN_OR_RETURN(S3Url u, parse_s3_url(p));
    if (u.key.empty()) return invalid_argument(p + ": a bucket, not an object");
    return client_->get_object(u.bucket, u.key, max_bytes);
  }
  Result<uint64_t> file_size(const std::string& p) override {
    CKPT_ASSIGN_OR_RETURN(S3Url u, parse_s3_url(p));
    CKPT_ASSIGN_OR_RETURN(ObjectInfo info, client_->head_object(u.bucket, u.key));
    return info.size;
  }
  Result<std::vector<std::string>> list_dir(const std::string& d) override {
    CKPT_ASSIGN_OR_RETURN(S3Url u, parse_s3_url(d));
    CKPT_ASSIGN_OR_RETURN(ListResult r, client_->list(u.bucket, dir_prefix(u.key), "/"));
    std::set<std::string> names;
    for (const ListEntry& e : r.objects) names.insert(base_name(e.key));
    for (const std::string& pre : r.prefixes) {
      names.insert(base_name(pre.substr(0, pre.size() - 1)));
    }
    names.erase("");
    if (names.empty()) return not_found(d + ": no such directory (no object under it)");
    return std::vector<std::string>(names.begin(), names.end());
  }

  // --- ObjectStore ---------------------------------------------------------------------------
  Result<bool> put_if_absent(const std::string& p, const std::string& bytes) override {
    Condition c;
    c.if_none_match = true;
    return put_if(p, bytes, c);
  }
  Result<std::unique_ptr<WritableFile>> new_exclusive(const std::string& p) override {
    CKPT_ASSIGN_OR_RETURN(S3Url u, for_write(p));
    return std::unique_ptr<WritableFile>(
        new S3Writable(ObjectWriter::create(client_.get(), u.bucket, u.key), p, true));
  }
  Result<Versioned> get_versioned(const std::string& p, uint64_t max_bytes) override {
    CKPT_ASSIGN_OR_RETURN(S3Url u, parse_s3_url(p));
    Versioned v;
    CKPT_ASSIGN_OR_RETURN(v.bytes, client_->get_object(u.bucket, u.key, max_bytes, &v.version));
    return v;
  }
  Result<bool> put_if_version(const std::string& p, const std::string& bytes,
                              const std::string& version) override {
    Condition c;
    c.if_match = version;
    return put_if(p, bytes, c);
  }
  Status delete_many(const std::vector<std::string>& paths) override {
    std::map<std::string, std::vector<std::string>> by_bucket;
    for (const std::string& p : paths) {
      CKPT_ASSIGN_OR_RETURN(S3Url u, parse_s3_url(p));
      by_bucket[u.bucket].push_back(u.key);
    }
    for (const auto& [bucket, keys] : by_bucket) {
      CKPT_RETURN_IF_ERROR(client_->delete_objects(bucket, keys));
    }
    return Status::ok();
  }
  Result<size_t> abort_uploads_under(const std::string& prefix) override {
    CKPT_ASSIGN_OR_RETURN(S3Url u, parse_s3_url(prefix));
    CKPT_ASSIGN_OR_RETURN(auto ups, client_->list_multipart_uploads(u.bucket, u.key));
    for (const UploadRef& up : ups) {
      CKPT_RETURN_IF_ERROR(client_->abort_multipart(u.bucket, up.key, up.upload_id));
    }
    return ups.size();
  }
  const std::string& scratch_dir() const override { return scratch_; }
  std::string describe() const override { return client_->config().describe(); }

 private:
  // A conditional PUT: false when the condition failed (412) and nothing was written.
  Result<bool> put_if(const std::string& p, const std::string& bytes, const Condition& c) {
    CKPT_ASSIGN_OR_RETURN(S3Url u, for_write(p));
    CKPT_ASSIGN_OR_RETURN(PutResult r,
                          client_->put_object(u.bucket, u.key, bytes.data(), bytes.size(), c));
    return !r.precondition_failed;
  }
  static std::string dir_prefix(const std::string& key) {
    return key.empty() || key.back() == '/' ? key : key + "/";
  }
  Result<bool> has_children(const S3Url& u) {
    if (u.key.empty()) return true;  // the bucket itself
    CKPT_ASSIGN_OR_RETURN(ListResult r, client_->list(u.bucket, dir_prefix(u.key), "/"));
    return !r.objects.empty() || !r.prefixes.empty();
  }
  // The URL of a write; the bucket is probed at its first write (s3_env.h).
  Result<S3Url> for_write(const std::string& p) {
    CKPT_ASSIGN_OR_RETURN(S3Url u, parse_s3_url(p));
    CKPT_RETURN_IF_ERROR(probe(u.bucket));
    return u;
  }
  Status probe(const std::string& bucket) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = probed_.find(bucket);
    if (it != probed_.end()) return it->second;
    const std::string key = ".ckpt-probe/" + random_hex(16);
    Condition c;
    c.if_none_match = true;
    Status result;
    auto first = client_->put_object(bucket, key, "1", 1, c);
    if (!first.is_ok()) {
      result = first.status();
    } else {
      auto second = client_->put_object(bucket, key, "2", 1, c);
      if (!second.is_ok()) {
        result = second.status();
      } else if (!second->precondition_failed) {
        result = unsupported(s3_url(bucket, "") + " (" + describe() +
                             ") ignores If-None-Match: it overwrote an existing object, so it "
                             "cannot keep one commit per step; ckpt does not write to it");
      }
      (void)client_->delete_objects(bucket, {key});
    }
    probed_.emplace(bucket, result);
    return result;
  }

  std::unique_ptr<S3Client> client_;
  std::string scratch_;
  LeaseOptions lease_;
  std::mutex mu_;
  std::map<std::string, Status> probed_;
};

}  // namespace

Result<std::unique_ptr<Env>> make_s3_env(S3Config config, std::string scratch_dir,
                                         LeaseOptions lease) {
  if (scratch_dir.empty()) {
    const char* tmp = std::getenv("TMPDIR");
    scratch_dir = std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") + "/ckpt-s3-" +
                  std::to_string(::getpid());
  }
  if (const char* ttl = std::getenv("CKPT_S3_LEASE_SECONDS"); ttl != nullptr && *ttl != '\0') {
    char* end = nullptr;
    const double v = std::strtod(ttl, &end);
    if (end == ttl || *end != '\0' || !(v >= 1 && v <= 86400)) {
      return invalid_argument(std::string("CKPT_S3_LEASE_SECONDS=") + ttl +
                              ": not a number of seconds in [1, 86400]");
    }
    lease.ttl_seconds = v;
  }
  CKPT_ASSIGN_OR_RETURN(auto client, S3Client::create(std::move(config)));
  return std::unique_ptr<Env>(new S3EnvImpl(std::move(client), std::move(scratch_dir), lease));
}

S3Client* s3_client_of(Env* env) {
  auto* s3 = dynamic_cast<S3EnvImpl*>(env);
  return s3 != nullptr ? s3->client() : nullptr;
}

}  // namespace ckpt::s3
