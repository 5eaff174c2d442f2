// CommitReads: an Env that counts whole-file reads of commit records (COMMIT.json; one GET
// each on an object store), for tests of how much a restore reads before its data.
#pragma once

#include <cstdint>
#include <string>

#include "ckpt/io/env_wrapper.h"

namespace ckpt::testing {

class CommitReads final : public EnvWrapper {
 public:
  using EnvWrapper::EnvWrapper;
  Result<std::string> read_whole(const std::string& p, uint64_t max_bytes) override {
    if (path_basename(p) == "COMMIT.json") ++reads;
    return EnvWrapper::read_whole(p, max_bytes);
  }
  int reads = 0;
};

}  // namespace ckpt::testing
