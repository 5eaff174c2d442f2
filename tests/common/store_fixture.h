// The one-tensor checkpoint the store tests save, and how many Env operations one such save
// takes (the crash tests cut a save at each of them). Needs ckpt_store.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ckpt/base/status.h"
#include "ckpt/format/tree.h"
#include "ckpt/io/env.h"

namespace ckpt::testing {

// What a save commits, and the retention it applies after the commit.
struct TinySave {
  std::vector<std::string> components = {"model"};
  bool record_components = false;  // also store them as the root attribute "components"
  int keep_last = 0;               // > 0: store::apply_retention(run, keep_last, 0) afterwards

  static TinySave keeping(int n) {
    TinySave s;
    s.keep_last = n;
    return s;
  }
};

// Writes `root` as the rank file of a one-rank step `step` under `run`, commits it (COMMIT.json,
// LATEST; docs/format.md §2) and applies the retention of `how`.
Status write_and_commit(Env* env, const std::string& run, int64_t step, Node* root,
                        const TinySave& how = {});

// One complete save of step `step`: /model/w holds 1000 floats of `value`, the root attribute
// "step" the step.
Status save_tiny(Env* env, const std::string& run, int64_t step, float value,
                 const TinySave& how = {});

// The Env operations (FaultInjectionEnv::operations()) of save_tiny(step 20) on top of a
// save_tiny(step 10) in a fresh directory.
Result<uint64_t> operations_of_a_save(const TinySave& how = {});

}  // namespace ckpt::testing
