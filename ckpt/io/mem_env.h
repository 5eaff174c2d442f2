// MemEnv: an Env held entirely in memory, for fast tests of everything that goes through Env
// (commit records, LATEST, retention, the journal, locks). HDF5 writes rank files through its own
// driver, so code that calls h5::write_structure still needs a real directory.
//
// Paths are plain strings: "a/b" and "a/b/" are the same directory, nothing else is normalised.
// A file object shares its bytes with the Env (a later write is seen by an open reader, as on
// POSIX). sync() and sync_dir() do nothing: nothing is lost. Thread-safe.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "ckpt/io/env.h"

namespace ckpt {

class MemEnv final : public Env {
 public:
  MemEnv() = default;

  Result<std::unique_ptr<WritableFile>> new_writable(const std::string& path) override;
  Result<std::unique_ptr<WritableFile>> open_for_update(const std::string& path) override;
  Result<std::unique_ptr<WritableFile>> open_append(const std::string& path) override;
  Result<std::unique_ptr<RandomAccessFile>> open_random(const std::string& raw) override;
  Status rename(const std::string& from, const std::string& to) override;
  Status exchange(const std::string& a, const std::string& b) override;
  Status sync_dir(const std::string& dir) override;
  Status make_dirs(const std::string& raw) override;
  Status remove_file(const std::string& raw) override;
  Status remove_tree(const std::string& raw) override;
  Status remove_dir(const std::string& raw) override;
  Result<FileKind> entry_kind(const std::string& raw) override;
  Result<std::unique_ptr<FileLock>> lock_file(const std::string& raw,
                                              const std::string& owner) override;
  bool exists(const std::string& raw) override;
  bool is_dir(const std::string& raw) override;
  Result<uint64_t> file_size(const std::string& raw) override;
  Result<std::vector<std::string>> list_dir(const std::string& raw) override;

  // Releases a lock (called by the lock object's destructor).
  void unlock(const std::string& path);

 private:
  using Bytes = std::shared_ptr<std::string>;
  Result<std::unique_ptr<WritableFile>> open_w(const std::string& raw, bool create, bool truncate,
                                               bool append);
  bool parent_exists(const std::string& path) const;  // caller holds mu_
  bool has_children(const std::string& dir) const;    // caller holds mu_

  std::mutex mu_;
  std::map<std::string, Bytes> files_;
  std::set<std::string> dirs_;
  std::set<std::string> locked_;
};

}  // namespace ckpt
