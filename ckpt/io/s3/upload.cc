// ObjectWriter (upload.h): a streamed, parallel multipart upload with bounded memory.
#include "ckpt/io/s3/upload.h"

#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

namespace ckpt::s3 {
namespace {

constexpr uint64_t kMinPart = 5u << 20;  // S3's smallest part but the last
constexpr uint64_t kMaxParts = 10000;

class MultipartWriter final : public ObjectWriter {
 public:
  MultipartWriter(S3Client* c, std::string bucket, std::string key, uint64_t size_hint)
      : c_(c), bucket_(std::move(bucket)), key_(std::move(key)) {
    part_ = std::max<uint64_t>(kMinPart, c->config().part_bytes);
    while (size_hint / part_ >= kMaxParts) part_ *= 2;
    workers_ = static_cast<size_t>(std::max(1, c->config().concurrency));
  }
  ~MultipartWriter() override {
    stop_workers();
    if (!upload_id_.empty() && !completed_) {
      (void)c_->abort_multipart(bucket_, key_, upload_id_);
    }
  }

  Status append(const void* data, size_t n) override {
    CKPT_RETURN_IF_ERROR(first_error());
    const char* p = static_cast<const char*>(data);
    while (n > 0) {
      const size_t k = static_cast<size_t>(std::min<uint64_t>(n, part_ - current_.size()));
      current_.append(p, k);
      p += k;
      n -= k;
      bytes_ += k;
      if (current_.size() == part_) CKPT_RETURN_IF_ERROR(submit());
    }
    return Status::ok();
  }

  Result<PutResult> finish(const Condition& cond) override {
    CKPT_RETURN_IF_ERROR(first_error());
    if (upload_id_.empty()) {  // one part: one PutObject
      completed_ = true;
      return c_->put_object(bucket_, key_, current_.data(), current_.size(), cond);
    }
    if (!current_.empty()) CKPT_RETURN_IF_ERROR(submit());
    stop_workers();
    CKPT_RETURN_IF_ERROR(first_error());
    auto done = c_->complete_multipart(bucket_, key_, upload_id_, etags_, cond);
    if (!done.is_ok() || done->precondition_failed) {
      (void)c_->abort_multipart(bucket_, key_, upload_id_);  // a failed Complete stays pending
      completed_ = true;
      return done;
    }
    completed_ = true;
    return done;
  }

  uint64_t bytes() const override { return bytes_; }

 private:
  struct Part {
    int number;
    std::string bytes;
  };

  Status submit() {
    if (upload_id_.empty()) {
      CKPT_ASSIGN_OR_RETURN(upload_id_, c_->create_multipart(bucket_, key_));
      for (size_t i = 0; i < workers_; ++i) pool_.emplace_back([this] { work(); });
    }
    if (etags_.size() >= kMaxParts) {  // read by this thread only (workers index, never resize)
      return invalid_argument(s3_url(bucket_, key_) + ": more than 10,000 parts");
    }
    std::unique_lock<std::mutex> lock(mu_);
    etags_.emplace_back();  // under the lock: workers write their ETags into it
    Part part{static_cast<int>(etags_.size()), std::move(current_)};
    // The next part goes into a buffer an uploaded part gave back when there is one: fresh pages
    // cost a page fault each (on a VM, tens of µs), so the buffers are allocated once per object.
    if (!spare_.empty()) {
      current_ = std::move(spare_.back());
      spare_.pop_back();
    } else {
      current_ = std::string();
      current_.reserve(part_);
    }
    // At most `workers_` parts wait: memory stays (2 workers + 2) parts.
    room_.wait(lock, [this] { return queue_.size() < workers_ || !error_.is_ok(); });
    if (!error_.is_ok()) return error_;
    queue_.push_back(std::move(part));
    ready_.notify_one();
    return Status::ok();
  }

  void work() {
    for (;;) {
      Part part;
      {
        std::unique_lock<std::mutex> lock(mu_);
        ready_.wait(lock, [this] { return !queue_.empty() || closing_; });
        if (queue_.empty()) return;
        part = std::move(queue_.front());
        queue_.pop_front();
        room_.notify_all();
      }
      auto etag = error_.is_ok() ? c_->upload_part(bucket_, key_, upload_id_, part.number,
                                                   part.bytes.data(), part.bytes.size())
                                 : Result<std::string>(error_);
      std::lock_guard<std::mutex> lock(mu_);
      part.bytes.clear();  // keeps its capacity
      spare_.push_back(std::move(part.bytes));
      if (etag.is_ok()) {
        etags_[static_cast<size_t>(part.number - 1)] = *etag;
      } else if (error_.is_ok()) {
        error_ = etag.status();
        room_.notify_all();
      }
    }
  }

  void stop_workers() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      closing_ = true;
    }
    ready_.notify_all();
    for (auto& t : pool_) t.join();
    pool_.clear();
    closing_ = false;
  }

  Status first_error() {
    std::lock_guard<std::mutex> lock(mu_);
    return error_;
  }

  S3Client* c_;
  std::string bucket_, key_;
  uint64_t part_ = kMinPart;
  size_t workers_ = 1;
  std::string current_;
  uint64_t bytes_ = 0;
  std::string upload_id_;
  std::vector<std::string> etags_;  // by part number - 1
  bool completed_ = false;
  std::mutex mu_;
  std::condition_variable ready_, room_;
  std::deque<Part> queue_;
  std::vector<std::string> spare_;  // buffers of uploaded parts, for the next ones
  bool closing_ = false;
  Status error_;
  std::vector<std::thread> pool_;
};

}  // namespace

std::unique_ptr<ObjectWriter> ObjectWriter::create(S3Client* client, std::string bucket,
                                                   std::string key, uint64_t size_hint) {
  return std::make_unique<MultipartWriter>(client, std::move(bucket), std::move(key), size_hint);
}

}  // namespace ckpt::s3
