#pragma once
// The root attributes of a rank file (docs/format.md, "Root attributes"): the one place that says
// what they are called, what this build writes and what it reads. The C++ Checkpointer, `ckpt
// convert` and the Python package (through _core) all stamp and check them through here.
#include <cstdint>
#include <string>
#include <vector>

#include "ckpt/base/status.h"
#include "ckpt/format/tree.h"

namespace ckpt {

inline constexpr const char* kFormatName = "ckpt";
inline constexpr int64_t kFormatVersion = 1;     // what this build writes
inline constexpr int64_t kMaxFormatVersion = 1;  // the newest this build reads
inline constexpr const char* kVersion = "0.1.0";

// Who wrote a file: "ckpt 0.1.0", "ckpt 0.1.0 convert", "ckpt-python 0.1.0".
std::string producer_string(const std::string& suffix = "");

struct RootAttrs {
  std::string producer = producer_string();
  std::string libtorch_version;  // "" when written without libtorch
  int64_t step = 0;
  int64_t rank = 0;
  int64_t world_size = 1;
  std::vector<std::string> components;
};

// Writes format, format_version, producer, libtorch_version, step, rank, world_size and
// components into `root` (other attributes are left as they are).
void stamp_root_attrs(const RootAttrs& a, Node* root);

// Refuses what a root says wrongly: Corrupt for another format (or an ill-typed attribute),
// Unsupported for a format version this build does not read; the message starts with `where`
// and names what was found and what this build reads. An absent attribute passes: files written
// through the store API directly (ckpt/store/rank_write.h) need not carry them.
Status check_root_format(const Node& root, const std::string& where);

}  // namespace ckpt
