// An Env that forwards every call to another: derive from it and override only what changes
// (tests' hooks, injected failures), so a new Env call reaches the target without editing every
// wrapper (as leveldb's EnvWrapper).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "ckpt/io/env.h"

namespace ckpt {

class EnvWrapper : public Env {
 public:
  explicit EnvWrapper(Env* target) : target_(target) {}
  Env* target() const { return target_; }

  ObjectStore* object_store(const std::string& p) override { return target_->object_store(p); }
  // A file system's write_atomic is built on the primitives below, so a wrapper that injects
  // faults into them sees its steps; an object store's is one PUT of the target's.
  Status write_atomic(const std::string& p, const std::string& c) override {
    return target_->object_store(p) != nullptr ? target_->write_atomic(p, c)
                                               : Env::write_atomic(p, c);
  }
  Result<std::string> read_whole(const std::string& p, uint64_t max_bytes) override {
    return target_->object_store(p) != nullptr ? target_->read_all(p, max_bytes)
                                               : Env::read_whole(p, max_bytes);
  }
  Result<std::unique_ptr<WritableFile>> new_writable(const std::string& p) override {
    return target_->new_writable(p);
  }
  Result<std::unique_ptr<WritableFile>> open_for_update(const std::string& p) override {
    return target_->open_for_update(p);
  }
  Result<std::unique_ptr<WritableFile>> open_append(const std::string& p) override {
    return target_->open_append(p);
  }
  Result<std::unique_ptr<WritableFile>> open_for_direct_update(const std::string& p) override {
    return target_->open_for_direct_update(p);
  }
  Result<std::unique_ptr<RandomAccessFile>> open_random(const std::string& p) override {
    return target_->open_random(p);
  }
  Status rename(const std::string& a, const std::string& b) override {
    return target_->rename(a, b);
  }
  Status exchange(const std::string& a, const std::string& b) override {
    return target_->exchange(a, b);
  }
  Status sync_dir(const std::string& d) override { return target_->sync_dir(d); }
  Status make_dirs(const std::string& d) override { return target_->make_dirs(d); }
  Status remove_file(const std::string& p) override { return target_->remove_file(p); }
  Status remove_tree(const std::string& d) override { return target_->remove_tree(d); }
  Status remove_dir(const std::string& d) override { return target_->remove_dir(d); }
  Result<FileKind> entry_kind(const std::string& p) override { return target_->entry_kind(p); }
  Result<std::unique_ptr<FileLock>> lock_file(const std::string& p,
                                              const std::string& owner) override {
    return target_->lock_file(p, owner);
  }
  bool exists(const std::string& p) override { return target_->exists(p); }
  bool is_dir(const std::string& p) override { return target_->is_dir(p); }
  Result<uint64_t> file_size(const std::string& p) override { return target_->file_size(p); }
  Result<std::vector<std::string>> list_dir(const std::string& d) override {
    return target_->list_dir(d);
  }

 private:
  Env* target_;
};

}  // namespace ckpt
