// FaultInjectionEnv: wraps another Env and makes the N-th mutating operation (create, write,
// fsync, rename, remove) fail, and every one after it — a process that died at that point. Tests
// walk N over every operation of a save to prove that LATEST never names an incomplete checkpoint.
// Not thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ckpt/io/env.h"

namespace ckpt {

class FaultInjectionEnv final : public Env {
 public:
  explicit FaultInjectionEnv(Env* base) : base_(base) {}

  // Fail the operation with this 1-based index and all later ones; 0 = never fail.
  void fail_at(uint64_t n) { fail_at_ = n; }
  uint64_t operations() const { return ops_; }
  bool crashed() const { return fail_at_ != 0 && ops_ >= fail_at_; }

  Result<std::unique_ptr<WritableFile>> new_writable(const std::string& path) override;
  Result<std::unique_ptr<WritableFile>> open_for_update(const std::string& path) override;
  Result<std::unique_ptr<WritableFile>> open_append(const std::string& path) override;
  Result<std::unique_ptr<RandomAccessFile>> open_random(const std::string& path) override {
    return base_->open_random(path);
  }
  Status rename(const std::string& from, const std::string& to) override;
  Status sync_dir(const std::string& dir) override;
  Status make_dirs(const std::string& dir) override;
  Status remove_file(const std::string& path) override;
  Status remove_tree(const std::string& dir) override;
  bool exists(const std::string& path) override { return base_->exists(path); }
  bool is_dir(const std::string& path) override { return base_->is_dir(path); }
  Result<uint64_t> file_size(const std::string& path) override { return base_->file_size(path); }
  Result<std::vector<std::string>> list_dir(const std::string& dir) override {
    return base_->list_dir(dir);
  }

  // Counts one operation; an error once the failure point is reached.
  Status tick(const std::string& what);

 private:
  Result<std::unique_ptr<WritableFile>> wrap(Result<std::unique_ptr<WritableFile>> f);
  Env* base_;
  uint64_t ops_ = 0;
  uint64_t fail_at_ = 0;
};

}  // namespace ckpt
