#include "ckpt/store/direct_writer.h"

#include <cstdlib>
#include <cstring>

namespace ckpt::store {

DirectWriter::DirectWriter(std::vector<std::unique_ptr<WritableFile>> files)
    : files_(std::move(files)), slots_(kSlots) {
  if (files_.size() != kWriters) error_ = internal_error("direct write: one handle per writer");
  for (Slot& s : slots_) {
    void* p = nullptr;
    if (::posix_memalign(&p, Env::kDirectIoAlignment, kChunk) != 0) p = nullptr;
    s.buf = static_cast<unsigned char*>(p);
    if (s.buf == nullptr) error_ = io_error("direct write: cannot allocate a bounce buffer");
  }
  for (size_t j = 0; j < kWriters; ++j) writers_.emplace_back([this, j] { writer_loop(j); });
}

DirectWriter::~DirectWriter() {
  (void)finish();
  for (Slot& s : slots_) std::free(s.buf);
}

Result<const unsigned char*> DirectWriter::put(uint64_t offset, const void* src, size_t n) {
  if (n == 0 || n > kChunk || n % Env::kDirectIoAlignment != 0 ||
      offset % Env::kDirectIoAlignment != 0) {
    return internal_error("direct write: unaligned piece [" + std::to_string(offset) + ", +" +
                          std::to_string(n) + ")");
  }
  std::unique_lock<std::mutex> lock(mu_);
  Slot& s = slots_[next_put_ % kSlots];  // only this thread changes next_put_
  cv_.wait(lock, [&] { return !s.full || !error_.is_ok(); });
  if (!error_.is_ok()) return error_;
  lock.unlock();
  std::memcpy(s.buf, src, n);  // unlocked: the writer thread never touches a free slot
  lock.lock();
  s.offset = offset;
  s.n = n;
  s.full = true;
  ++next_put_;
  lock.unlock();
  cv_.notify_all();
  return const_cast<const unsigned char*>(s.buf);
}

void DirectWriter::writer_loop(size_t first) {
  for (size_t k = first;; k += kWriters) {
    Slot& s = slots_[k % kSlots];
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return s.full || (done_ && k >= next_put_) || !error_.is_ok(); });
      if (!error_.is_ok() || !s.full) return;
    }
    Status st = files_[first]->write_at(s.offset, s.buf, s.n);
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!st.is_ok()) error_ = st;
      s.full = false;
    }
    cv_.notify_all();
  }
}

Status DirectWriter::finish() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    done_ = true;
  }
  cv_.notify_all();
  for (auto& w : writers_) {
    if (w.joinable()) w.join();
  }
  Status close;
  for (auto& f : files_) {
    Status c = f ? f->close() : Status::ok();
    if (close.is_ok()) close = c;
    f.reset();
  }
  std::lock_guard<std::mutex> lock(mu_);
  return error_.is_ok() ? close : error_;
}

}  // namespace ckpt::store
