// Helpers shared by the tests: temporary directories, a sample tree, shell commands, whole files.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ckpt/format/tree.h"

namespace ckpt::testing {

// A fresh empty directory under /tmp, removed when the object dies.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// A tree with every dtype, a 0-d and an empty tensor, nested groups and every attribute type.
// The bytes live in `storage`, which must outlive the tree.
Node sample_tree(std::vector<std::vector<unsigned char>>* storage);

// Runs a shell command; returns its exit status and stdout.
int run_command(const std::string& cmd, std::string* out = nullptr);

std::string read_file(const std::string& path);
void write_file(const std::string& path, const std::string& bytes);

// XORs the byte at `offset` of `path` with `mask`, in place.
void flip_bits(const std::string& path, uint64_t offset, unsigned char mask);

}  // namespace ckpt::testing
