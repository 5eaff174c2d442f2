// Helpers for the resume tests: a checkpoint tree with tensors of many
// sizes around the chunk sizes the tests use, and a deep comparison of two restored trees.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ckpt/format/manifest.h"
#include "ckpt/format/tree.h"
#include "tests/common/test_util.h"

namespace ckpt::resume_test {

using testing::TempDir;  // tests/common/test_util.h

// Tensors of 0, 1, 3, 4095, 4097, 12345 bytes, several of 64 KiB ± 1, 300 KB and 1.1 MB (larger
// than the small chunk sizes), every component group, attributes and an alias. The bytes live in
// `storage`, which must outlive the tree.
Node varied_tree(std::vector<std::vector<unsigned char>>* storage);

// varied_tree() written as rank 0 of step 42 in a temporary folder (write_rank).
struct SavedRank {
  TempDir dir;
  std::vector<std::vector<unsigned char>> storage;
  Node tree;
  Manifest manifest;
};
void save_varied(SavedRank* s);

// Empty string when a and b hold the same groups, attributes and tensors (dtype, shape, hash,
// alias, bytes — tensors without bytes must be without bytes in both); else the first difference.
std::string compare_trees(const Node& a, const Node& b, const std::string& path = "");

// The first padding byte after a tensor that is followed by a gap before the next one (fails the
// test when there is none).
uint64_t padding_offset(const Manifest& m);

// Flips one bit of the file at `offset`.
void flip_bit(const std::string& file, uint64_t offset);

}  // namespace ckpt::resume_test
