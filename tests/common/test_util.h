// Helpers shared by the tests: temporary directories, a sample tree, shell commands, whole files.
#pragma once

#include <cstddef>
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

// A RandomAccessFile::ByteVisitor (`&ByteSum::run`, the ByteSum as its argument) that adds up
// the bytes it is shown; byte_sum is the same over bytes [from, from + n) of `s`.
struct ByteSum {
  uint64_t sum = 0;
  static void run(const unsigned char* bytes, size_t n, void* arg);
};
uint64_t byte_sum(const std::string& s, size_t from, size_t n);

// Whether AddressSanitizer instruments this build: its allocator replaces glibc's (mallinfo2
// then accounts nothing) and its SIGBUS handler is installed before ckpt's.
#if defined(__SANITIZE_ADDRESS__)
constexpr bool kAddressSanitizer = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kAddressSanitizer = true;
#else
constexpr bool kAddressSanitizer = false;
#endif
#else
constexpr bool kAddressSanitizer = false;
#endif

}  // namespace ckpt::testing
