// Environment snapshot and diff: "something always changed" (DOMAIN.md, check 7).
//
// capture_env records, as flat "key" -> "value" strings: the ckpt version, compiler and C++
// library, library versions compiled in (simdjson, nlohmann-json), CUDA toolkit and driver when
// present, kernel, hostname, core count, the environment variables that change training
// behaviour (CUDA_*, NCCL_*, OMP_*, MKL_*, TORCH_*, PYTORCH_*, GLOO_*, MASTER_*, WORLD_SIZE,
// RANK, LOCAL_RANK, LD_LIBRARY_PATH, CKPT_*) and, when given a config file, its XXH3 digest.
// Values and pure functions apart from capture_env's reads of the process and /proc; thread-safe.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "ckpt/base/status.h"

namespace ckpt::profile {

struct EnvSnapshot {
  std::map<std::string, std::string> fields;
};

// `config_path` may be empty. NotFound/IoError when it is given but cannot be read.
Result<EnvSnapshot> capture_env(const std::string& config_path);

nlohmann::json env_json(const EnvSnapshot& e);
Result<EnvSnapshot> env_from_json(const nlohmann::json& j, const std::string& source);
std::string env_text(const EnvSnapshot& e);
// "key: old -> new" for every key that differs, appears or disappears.
std::vector<std::string> diff_env(const EnvSnapshot& a, const EnvSnapshot& b);

}  // namespace ckpt::profile
