// The checkpoints of a PyTorch run that say where its data loader stood, read without executing
// them (verify's non-executing torch.save reader): Lightning .ckpt files (global_step, epoch,
// loops.fit_loop's batch progress, hyper_parameters) and any torch.save'd file holding a
// torchdata StatefulDataLoader state_dict (a dict with `_num_yielded`, or `_snapshot` with
// workers), wherever it sits in the pickle. Lives in cli/ because it composes verify/ and
// analytics/ (analytics/coverage/loader_run.h decides what the facts mean).
#pragma once

#include <string>
#include <vector>

#include "analytics/coverage/loader_run.h"
#include "ckpt/base/status.h"
#include "ckpt/io/env.h"

namespace ckpt::cli {

// Every .ckpt, .pt and .pth regular file up to four folders below `dir` that is a Lightning
// checkpoint or holds a StatefulDataLoader state (other torch.save files are passed over).
// Empty when there is none. On failure corrupt naming the file: a .ckpt that is not a readable
// torch.save archive, a loader state without a top-level step.
Result<std::vector<analytics::LoaderCheckpoint>> read_loader_checkpoints(Env* env,
                                                                         const std::string& dir);

// One file; `*found` false when it is neither kind.
Result<analytics::LoaderCheckpoint> read_loader_checkpoint(Env* env, const std::string& path,
                                                           bool* found);

}  // namespace ckpt::cli
