// env_for_location and routing_env (location.h): which Env a run directory's text names.
#include "ckpt/io/location.h"

#include <cctype>
#include <map>
#include <memory>
#include <mutex>

#ifdef CKPT_HAVE_S3_ENV
#include "ckpt/io/s3/config.h"
#include "ckpt/io/s3/s3_env.h"
#endif

namespace ckpt {
namespace {

// The scheme of "scheme:/..." (letters, digits, + . -, starting with a letter), or "".
std::string scheme_of(const std::string& text) {
  const size_t colon = text.find(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 >= text.size()) return {};
  if (text[colon + 1] != '/') return {};
  if (!std::isalpha(static_cast<unsigned char>(text[0]))) return {};
  for (size_t i = 1; i < colon; ++i) {
    const char c = text[i];
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '+' && c != '.' && c != '-') return {};
  }
  return text.substr(0, colon);
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

#ifdef CKPT_HAVE_S3_ENV
// One S3 Env for the process: the endpoint and credentials come from its environment.
struct ProcessS3 {
  std::mutex mu;
  std::unique_ptr<Env> env;
  Status failed;
};
ProcessS3& process_s3() {
  static ProcessS3* p = new ProcessS3();  // never destroyed: used until the process ends
  return *p;
}

Result<Env*> s3_env(const std::string& location) {
  ProcessS3& p = process_s3();
  std::lock_guard<std::mutex> lock(p.mu);
  if (p.env) return p.env.get();
  if (!p.failed.is_ok()) return p.failed;
  auto config = s3::load_config();
  if (!config.is_ok()) {
    return Status(config.status().code(), location + ": " + config.status().message());
  }
  auto made = s3::make_s3_env(std::move(*config));
  if (!made.is_ok()) {
    // A store refused at its probe stays refused: every later call says the same.
    p.failed = Status(made.status().code(), location + ": " + made.status().message());
    return p.failed;
  }
  p.env = std::move(*made);
  return p.env.get();
}
#endif

}  // namespace

bool looks_like_url(const std::string& text) { return !scheme_of(text).empty(); }

StoreTraffic store_traffic() {
  StoreTraffic t;
#ifdef CKPT_HAVE_S3_ENV
  ProcessS3& p = process_s3();
  std::lock_guard<std::mutex> lock(p.mu);
  s3::S3Client* c = p.env ? s3::s3_client_of(p.env.get()) : nullptr;
  if (c == nullptr) return t;
  const s3::RequestStats& s = c->stats();
  t.gets = s.gets;
  t.puts = s.puts;
  t.heads = s.heads;
  t.lists = s.lists;
  t.deletes = s.deletes;
  t.multipart = s.multipart;
  t.retries = s.retries;
  t.bytes_up = s.bytes_up;
  t.bytes_down = s.bytes_down;
#endif
  return t;
}

std::string normalize_location(const std::string& location) {
  std::string s = location;
  const size_t keep = looks_like_url(s) ? s.find("://") + 3 : 1;
  while (s.size() > keep && s.back() == '/') s.pop_back();
  return s;
}

Result<Env*> env_for_location(const std::string& location, Env* local) {
  const std::string scheme = scheme_of(location);
  if (scheme.empty()) return local != nullptr ? local : Env::posix();
  const bool s3 = lower(scheme) == "s3" && location.compare(scheme.size(), 3, "://") == 0;
  if (!s3 && lower(scheme) == "s3") {
    return invalid_argument(location + ": malformed s3 URL; write s3://bucket/prefix");
  }
  if (!s3) {
    return invalid_argument(location + ": unsupported URL scheme '" + scheme +
                            "'; ckpt reads and writes local paths and s3://bucket/prefix (a URL "
                            "is never taken for a local folder)");
  }
#ifdef CKPT_HAVE_S3_ENV
  return s3_env(location);
#else
  return unsupported(location +
                     ": this build of ckpt has no object-storage support (built without "
                     "ckpt_s3_env); use a local path");
#endif
}

namespace {

// Every call goes to the Env its path names.
class RoutingEnv final : public Env {
 public:
  explicit RoutingEnv(Env* local) : local_(local) {}

  ObjectStore* object_store(const std::string& p) override {
    auto e = env_for_location(p, local_);
    return e.is_ok() ? (*e)->object_store(p) : nullptr;
  }
  Status write_atomic(const std::string& p, const std::string& c) override {
    CKPT_ASSIGN_OR_RETURN(Env * e, pick(p));
    return e->write_atomic(p, c);
  }
  Result<std::string> read_whole(const std::string& p, uint64_t max_bytes) override {
    CKPT_ASSIGN_OR_RETURN(Env * e, pick(p));
    return e->read_all(p, max_bytes);
  }
  Result<std::unique_ptr<WritableFile>> new_writable(const std::string& p) override {
    CKPT_ASSIGN_OR_RETURN(Env * e, pick(p));
    return e->new_writable(p);
  }
  Result<std::unique_ptr<WritableFile>> open_for_update(const std::string& p) override {
    CKPT_ASSIGN_OR_RETURN(Env * e, pick(p));
    return e->open_for_update(p);
  }
  Result<std::unique_ptr<WritableFile>> open_append(const std::string& p) override {
    CKPT_ASSIGN_OR_RETURN(Env * e, pick(p));
    return e->open_append(p);
  }
  Result<std::unique_ptr<WritableFile>> open_for_direct_update(const std::string& p) override {
    CKPT_ASSIGN_OR_RETURN(Env * e, pick(p));
    return e->open_for_direct_update(p);
  }
  Result<std::unique_ptr<RandomAccessFile>> open_random(const std::string& p) override {
    CKPT_ASSIGN_OR_RETURN(Env * e, pick(p));
    return e->open_random(p);
  }
  Status rename(const std::string& a, const std::string& b) override {
    CKPT_ASSIGN_OR_RETURN(Env * e, pick_both(a, b));
    return e->rename(a, b);
  }
  Status exchange(const std::string& a, const std::string& b) override {
    CKPT_ASSIGN_OR_RETURN(Env * e, pick_both(a, b));
    return e->exchange(a, b);
  }
  Status sync_dir(const std::string& d) override {
    CKPT_ASSIGN_OR_RETURN(Env * e, pick(d));
    return e->sync_dir(d);
  }
  Status make_dirs(const std::string& d) override {
    CKPT_ASSIGN_OR_RETURN(Env * e, pick(d));
    return e->make_dirs(d);
  }
  Status remove_file(const std::string& p) override {
    CKPT_ASSIGN_OR_RETURN(Env * e, pick(p));
    return e->remove_file(p);
  }
  Status remove_tree(const std::string& d) override {
    CKPT_ASSIGN_OR_RETURN(Env * e, pick(d));
    return e->remove_tree(d);
  }
  Status remove_dir(const std::string& d) override {
    CKPT_ASSIGN_OR_RETURN(Env * e, pick(d));
    return e->remove_dir(d);
  }
  Result<FileKind> entry_kind(const std::string& p) override {
    CKPT_ASSIGN_OR_RETURN(Env * e, pick(p));
    return e->entry_kind(p);
  }
  Result<std::unique_ptr<FileLock>> lock_file(const std::string& p,
                                              const std::string& owner) override {
    CKPT_ASSIGN_OR_RETURN(Env * e, pick(p));
    return e->lock_file(p, owner);
  }
  bool exists(const std::string& p) override {
    auto e = pick(p);
    return e.is_ok() && (*e)->exists(p);
  }
  bool is_dir(const std::string& p) override {
    auto e = pick(p);
    return e.is_ok() && (*e)->is_dir(p);
  }
  Result<uint64_t> file_size(const std::string& p) override {
    CKPT_ASSIGN_OR_RETURN(Env * e, pick(p));
    return e->file_size(p);
  }
  Result<std::vector<std::string>> list_dir(const std::string& d) override {
    CKPT_ASSIGN_OR_RETURN(Env * e, pick(d));
    return e->list_dir(d);
  }

 private:
  Result<Env*> pick(const std::string& p) const { return env_for_location(p, local_); }
  Result<Env*> pick_both(const std::string& a, const std::string& b) const {
    CKPT_ASSIGN_OR_RETURN(Env * ea, pick(a));
    CKPT_ASSIGN_OR_RETURN(Env * eb, pick(b));
    if (ea != eb) return invalid_argument(a + " and " + b + " are not on the same storage");
    return ea;
  }
  Env* local_;
};

}  // namespace

Env* routing_env(Env* local) {
  if (local == nullptr) local = Env::posix();
  static std::mutex mu;
  static std::map<Env*, std::unique_ptr<RoutingEnv>> envs;
  std::lock_guard<std::mutex> lock(mu);
  auto& slot = envs[local];
  if (!slot) slot = std::make_unique<RoutingEnv>(local);
  return slot.get();
}

}  // namespace ckpt
