// The root of a rank file as every writer fills it (docs/format.md, "Inside a rank file"): the
// format's name and version, who wrote it, and the step, rank, world size and components; and the
// environment record of the train component (`env`, whose XXH3 is `env_digest`). One description
// for the C++ Checkpointer, `ckpt convert` and the Python package (ckpt._core exposes it). Pure:
// no torch, no HDF5, no I/O; stateless, thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ckpt/base/status.h"
#include "ckpt/format/tree.h"

namespace ckpt {

// The root attribute `format` and the format version this build writes and reads.
inline constexpr char kFormatName[] = "ckpt";
inline constexpr int64_t kFormatVersion = 1;
// The version of a rank file holding pieces of global tensors (boxes; docs/format.md §8), and of
// a checkpoint with an INDEX. A checkpoint without boxes stays version 1.
inline constexpr int64_t kBoxFormatVersion = 2;
// ckpt's release (CMakeLists.txt's project() and python/pyproject.toml say the same; the
// `producer` attribute and `ckpt --version` print it).
inline constexpr char kVersion[] = "0.1.0";
inline constexpr int64_t kMaxFormatVersion = 2;  // the newest version this build reads

struct RankRoot {
  std::string producer;          // "ckpt 0.1.0", "ckpt-python 0.1.0"
  std::string libtorch_version;  // the torch the state came from
  int64_t step = 0;
  int64_t rank = 0;
  int64_t world_size = 1;
  std::vector<std::string> components;  // in the order they are written
};

// Sets format, format_version, producer, libtorch_version, step, rank, world_size and components
// on `root`.
void set_root_attrs(const RankRoot& r, Node* root);

// Refuses what a root says wrongly: Corrupt for another format (or an ill-typed attribute),
// Unsupported for a format version this build does not read; the message starts with `where`
// and names what was found and what this build reads. An absent attribute passes: files written
// through the store API directly (ckpt/store/rank_write.h) need not carry them.
Status check_root_format(const Node& root, const std::string& where);

// What can change a run's numbers: the train component's `env`.
struct EnvironmentRecord {
  std::string libtorch;  // the torch version (torch.__version__ in Python)
  // The toolchain: "compiler" = "gcc 12.2.0" in C++; the Python package records "python" = its
  // version in its place (docs/format.md, "train").
  std::string toolchain_key = "compiler";
  std::string toolchain;
  bool cuda_available = false;
  int64_t cuda_devices = 0;
  std::string cuda_runtime = "none";  // "12.4"; "none" without CUDA
  std::string host;
};

// The JSON text of `env` (compact, keys sorted): what `env` stores and `env_digest` hashes.
std::string environment_json(const EnvironmentRecord& env);

}  // namespace ckpt
