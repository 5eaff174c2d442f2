// take_lease (s3_lease.h): RUN/LOCK as an object with a holder, a token and a renewal time.
//
// Taking: PUT If-None-Match: *. Held by another: GET it; renewed within ttl → kLocked; older, or
// written by a process of this machine that no longer exists → take it over with PUT If-Match:
// <its ETag> (of two takers, one wins; the other is kLocked).
// Holding: a thread PUTs the lease again with If-Match: <our ETag> every ttl/3, and so does every
// still_at() (the writer's check before a save and before a commit); a 412 means someone took it
// over (we were presumed dead), and still_at() turns false, which stops the writer there. Release:
// DELETE when the lease is still ours.
#include "ckpt/io/s3/s3_lease.h"

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <climits>
#include <condition_variable>
#include <ctime>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>
#include <type_traits>

#include "ckpt/base/text.h"

namespace ckpt::s3 {
namespace {

double unix_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// What names this kernel and PID namespace: a holder that wrote the same value and whose pid is
// gone died on this machine, and its lease can be taken at once instead of after its ttl (a
// crashed job restarted on its node). Empty when unknown: then only the ttl frees a lease.
const std::string& this_machine() {
  static const std::string id = [] {
    std::ifstream boot("/proc/sys/kernel/random/boot_id");
    std::string b;
    std::getline(boot, b);
    char ns[128] = {0};
    const ssize_t n = ::readlink("/proc/self/ns/pid", ns, sizeof ns - 1);
    return b.empty() || n <= 0 ? std::string() : b + " " + std::string(ns, static_cast<size_t>(n));
  }();
  return id;
}

bool pid_is_gone(int64_t pid) {
  return pid > 0 && pid <= INT32_MAX && ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH;
}

std::string lease_body(const std::string& owner, const std::string& token, double ttl) {
  nlohmann::json j = {{"owner", owner},
                      {"token", token},
                      {"renewed_unix", unix_now()},
                      {"ttl_seconds", ttl},
                      {"machine", this_machine()},
                      {"pid", static_cast<int64_t>(::getpid())}};
  return j.dump() + "\n";
}

// A field of a lease someone else wrote, or `fallback` when it is missing or of another type.
template <typename T>
T field(const nlohmann::json& j, const char* key, T fallback) {
  if (!j.is_object() || !j.contains(key)) return fallback;
  const nlohmann::json& v = j[key];
  if constexpr (std::is_same_v<T, std::string>) {
    return v.is_string() ? v.get<std::string>() : fallback;
  } else {
    return v.is_number() ? v.get<T>() : fallback;
  }
}

class Lease final : public FileLock {
 public:
  Lease(S3Client* c, S3Url u, std::string path, std::string owner, std::string token,
        std::string etag, double ttl)
      : c_(c),
        u_(std::move(u)),
        path_(std::move(path)),
        owner_(std::move(owner)),
        token_(std::move(token)),
        ttl_(ttl),
        etag_(std::move(etag)) {
    renewer_ = std::thread([this] { renew_loop(); });
  }
  ~Lease() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    renewer_.join();
    if (lost_) return;
    // Released only while it is still ours (a taker's lease is never deleted).
    std::string etag;
    auto now = c_->get_object(u_.bucket, u_.key, 1u << 16, &etag);
    if (now.is_ok() && now->find(token_) != std::string::npos) {
      (void)c_->delete_objects(u_.bucket, {u_.key});
    }
  }
  // Renews the lease now, so a writer that was paused past its ttl (SIGSTOP, a long GC pause, a
  // partition) learns before it writes that another writer took over — not only at the next
  // background renewal.
  bool still_at(const std::string& path) const override {
    (void)path;
    renew();
    std::lock_guard<std::mutex> lock(mu_);
    return !lost_;
  }
  std::string lost_reason() const override {
    std::lock_guard<std::mutex> lock(mu_);
    return lost_ ? why_ : std::string();
  }

 private:
  void renew_loop() {
    std::unique_lock<std::mutex> lock(mu_);
    const auto period = std::chrono::duration<double>(ttl_ / 3);
    while (!stop_ && !lost_) {
      if (cv_.wait_for(lock, period, [this] { return stop_; })) break;
      lock.unlock();
      renew();
      lock.lock();
    }
  }

  // One renewal: PUT If-Match our ETag. A 412 or a missing lease means another writer took it
  // over (or removed it); a store unreachable for longer than the ttl means it may have.
  void renew() const {
    std::lock_guard<std::mutex> one(renewing_);  // two renewals with one ETag: one would 412
    std::string etag;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (lost_) return;
      etag = etag_;
    }
    const std::string body = lease_body(owner_, token_, ttl_);
    Condition cond;
    cond.if_match = etag;
    auto r = c_->put_object(u_.bucket, u_.key, body.data(), body.size(), cond);
    const auto now = std::chrono::steady_clock::now();
    std::lock_guard<std::mutex> lock(mu_);
    if (r.is_ok() && !r->precondition_failed) {
      etag_ = r->etag;
      renewed_ = now;
    } else if (r.is_ok() || r.status().code() == Code::kNotFound) {
      lost_ = true;
      why_ = path_ +
             ": another writer took over this run's lease (this process was presumed "
             "dead: its lease was not renewed for " +
             std::to_string(static_cast<long long>(ttl_)) + " s); refusing to write";
    } else if (std::chrono::duration<double>(now - renewed_).count() > ttl_) {
      lost_ = true;
      why_ = path_ + ": the lease could not be renewed for longer than its " +
             std::to_string(static_cast<long long>(ttl_)) + " s ttl (" + r.status().message() +
             "): another writer may hold it; refusing to write";
    }
  }

  S3Client* c_;
  S3Url u_;
  std::string path_, owner_, token_;
  double ttl_;
  mutable std::mutex mu_, renewing_;
  std::condition_variable cv_;
  mutable std::string etag_, why_;
  mutable std::chrono::steady_clock::time_point renewed_ = std::chrono::steady_clock::now();
  bool stop_ = false;
  mutable bool lost_ = false;
  std::thread renewer_;
};

}  // namespace

Result<std::unique_ptr<FileLock>> take_lease(S3Client* client, const S3Url& u,
                                             const std::string& path, const std::string& owner,
                                             const LeaseOptions& options) {
  const std::string token = random_hex(32);
  const std::string body = lease_body(owner, token, options.ttl_seconds);
  Condition create;
  create.if_none_match = true;
  CKPT_ASSIGN_OR_RETURN(PutResult made,
                        client->put_object(u.bucket, u.key, body.data(), body.size(), create));
  if (!made.precondition_failed) {
    return std::unique_ptr<FileLock>(
        new Lease(client, u, path, owner, token, made.etag, options.ttl_seconds));
  }
  std::string etag;
  CKPT_ASSIGN_OR_RETURN(std::string held, client->get_object(u.bucket, u.key, 1u << 16, &etag));
  const nlohmann::json j = nlohmann::json::parse(held, nullptr, false);
  const std::string holder = field<std::string>(j, "owner", "an unreadable lease");
  const double renewed = field<double>(j, "renewed_unix", 0);
  const double ttl = field<double>(j, "ttl_seconds", options.ttl_seconds);
  const double age = unix_now() - renewed;
  const bool died_here = !this_machine().empty() &&
                         field<std::string>(j, "machine", "") == this_machine() &&
                         pid_is_gone(field<int64_t>(j, "pid", 0));
  if (age <= ttl && !died_here) {
    return locked(path + ": locked by " + holder + " (renewed " +
                  std::to_string(static_cast<long long>(age)) +
                  " s ago; a dead holder's lease runs out in " +
                  std::to_string(static_cast<long long>(ttl - age) + 1) + " s)");
  }
  Condition takeover;
  takeover.if_match = etag;
  CKPT_ASSIGN_OR_RETURN(PutResult taken,
                        client->put_object(u.bucket, u.key, body.data(), body.size(), takeover));
  if (taken.precondition_failed) {
    return locked(path + ": locked by another writer that took over the expired lease of " +
                  holder);
  }
  return std::unique_ptr<FileLock>(
      new Lease(client, u, path, owner, token, taken.etag, options.ttl_seconds));
}

}  // namespace ckpt::s3
