// Test doubles for a remote store over local files: a RandomAccessFile that says it is remote
// (ReadProfile::remote) and counts the bytes read from it, and an Env that opens every file so.
// The restore paths read a remote file once where they would read a local one twice; these tell.
#pragma once

#include <algorithm>
#include <atomic>
#include <memory>
#include <string>

#include "ckpt/io/env_wrapper.h"

namespace ckpt::testing {

class CountedRemote final : public RandomAccessFile {
 public:
  CountedRemote(std::unique_ptr<RandomAccessFile> base, std::atomic<uint64_t>* read,
                ReadProfile profile, std::atomic<uint64_t>* parts = nullptr)
      : base_(std::move(base)), read_(read), profile_(profile), parts_(parts) {}
  Status read_at(uint64_t offset, void* dst, size_t n) const override {
    *read_ += n;
    return base_->read_at(offset, dst, n);
  }
  // As a GET lands: parts of uneven sizes (1 byte to 96 KiB, from the offset), each shown once
  // it is in dst, so a part ends anywhere — inside a tensor, on its boundary, in padding.
  Status read_visiting(uint64_t offset, void* dst, size_t n, ByteVisitor visit,
                       void* arg) const override {
    CKPT_RETURN_IF_ERROR(read_at(offset, dst, n));
    uint64_t state = offset * 0x9E3779B97F4A7C15ull + n + 1;
    const auto* bytes = static_cast<const unsigned char*>(dst);
    for (size_t at = 0; at < n;) {
      state ^= state << 13;
      state ^= state >> 7;
      state ^= state << 17;
      const size_t part =
          std::min<size_t>(n - at, state % 4 == 0 ? 1 + state % 64 : 1 + (state >> 8) % (96 << 10));
      visit(bytes + at, part, arg);
      at += part;
      if (parts_ != nullptr) ++*parts_;
    }
    return Status::ok();
  }
  uint64_t size() const override { return base_->size(); }
  const std::string& path() const override { return base_->path(); }
  std::string version() const override { return base_->version(); }
  ReadProfile read_profile() const override { return profile_; }

 private:
  std::unique_ptr<RandomAccessFile> base_;
  std::atomic<uint64_t>* read_;
  ReadProfile profile_;
  std::atomic<uint64_t>* parts_;  // counts the parts read_visiting shows
};

class RemoteEnv final : public EnvWrapper {
 public:
  explicit RemoteEnv(ReadProfile profile) : EnvWrapper(Env::posix()), profile_(profile) {}
  Result<std::unique_ptr<RandomAccessFile>> open_random(const std::string& p) override {
    CKPT_ASSIGN_OR_RETURN(auto f, target()->open_random(p));
    return std::unique_ptr<RandomAccessFile>(
        std::make_unique<CountedRemote>(std::move(f), &read, profile_, &parts));
  }
  std::atomic<uint64_t> read{0};   // bytes read from every file opened
  std::atomic<uint64_t> parts{0};  // parts shown as they landed (read_visiting)

 private:
  ReadProfile profile_;
};

}  // namespace ckpt::testing
