// Test doubles for a remote store over local files: a RandomAccessFile that says it is remote
// (ReadProfile::remote) and counts the bytes read from it, and an Env that opens every file so.
// The restore paths read a remote file once where they would read a local one twice; these tell.
#pragma once

#include <atomic>
#include <memory>
#include <string>

#include "ckpt/io/env_wrapper.h"

namespace ckpt::testing {

class CountedRemote final : public RandomAccessFile {
 public:
  CountedRemote(std::unique_ptr<RandomAccessFile> base, std::atomic<uint64_t>* read,
                ReadProfile profile)
      : base_(std::move(base)), read_(read), profile_(profile) {}
  Status read_at(uint64_t offset, void* dst, size_t n) const override {
    *read_ += n;
    return base_->read_at(offset, dst, n);
  }
  uint64_t size() const override { return base_->size(); }
  const std::string& path() const override { return base_->path(); }
  std::string version() const override { return base_->version(); }
  ReadProfile read_profile() const override { return profile_; }

 private:
  std::unique_ptr<RandomAccessFile> base_;
  std::atomic<uint64_t>* read_;
  ReadProfile profile_;
};

class RemoteEnv final : public EnvWrapper {
 public:
  explicit RemoteEnv(ReadProfile profile) : EnvWrapper(Env::posix()), profile_(profile) {}
  Result<std::unique_ptr<RandomAccessFile>> open_random(const std::string& p) override {
    CKPT_ASSIGN_OR_RETURN(auto f, target()->open_random(p));
    return std::unique_ptr<RandomAccessFile>(
        std::make_unique<CountedRemote>(std::move(f), &read, profile_));
  }
  std::atomic<uint64_t> read{0};  // bytes read from every file opened

 private:
  ReadProfile profile_;
};

}  // namespace ckpt::testing
