// LR points from our checkpoints alone, for a run directory whose journal is missing: each
// committed checkpoint's scheduler component (ckpt::sched::Scheduler's node: the spec, last_step
// and last_lr) gives one point (last_step, last_lr) and the schedule spec, so `ckpt lr RUN_DIR`
// can still compare the recorded LRs with the closed form. Checkpoints whose scheduler is missing
// or of another layout are listed in the warnings.
//
// Reads rank 0's metadata only, through ckpt/store. Free function; thread-safe.
#pragma once

#include <string>

#include "analytics/lr/lr_input.h"
#include "ckpt/base/status.h"
#include "ckpt/io/env.h"

namespace ckpt::analytics {

// On failure: the run directory cannot be listed, or corrupt when no committed checkpoint has a
// readable scheduler component.
Result<LrSeries> lr_from_checkpoints(Env* env, const std::string& run_dir);

}  // namespace ckpt::analytics
