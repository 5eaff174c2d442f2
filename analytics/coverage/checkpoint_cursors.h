// The loader cursors our checkpoints recorded, read from every rank file of every committed
// checkpoint of a run (metadata only: no tensor bytes), and checked against the run journal: the
// cursor a checkpoint saved must be where the journal's last step before that save left the
// loader, and every rank must hold the same global cursor. This is how `ckpt coverage RUN_DIR`
// confirms that the journal it replays and the checkpoints it would resume from agree.
//
// Reads files through ckpt/store (the HDF5 reader stays behind it). Free functions; thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "analytics/input/run_journal.h"
#include "ckpt/base/status.h"
#include "ckpt/io/env.h"
#include "ckpt/loader/resumable_sampler.h"

namespace ckpt::analytics {

struct CheckpointCursorCheck {
  int64_t step = 0;
  std::string name;                                    // step-NNNNNNNNNNNN
  int64_t ranks = 0;                                   // rank files read
  std::optional<loader::LoaderCursor> cursor;          // rank 0's; nullopt: no loader component
  std::optional<loader::LoaderCursor> journal_cursor;  // where the journal says the loader was
  bool ranks_agree = true;
  std::string problem;  // empty when the checkpoint agrees with itself and the journal

  bool ok() const { return problem.empty(); }
};

// One entry per committed checkpoint, ascending by step. On failure only when the run directory
// cannot be listed; an unreadable rank file becomes that checkpoint's `problem`.
Result<std::vector<CheckpointCursorCheck>> check_checkpoint_cursors(Env* env,
                                                                    const std::string& run_dir,
                                                                    const RunJournal& journal);

}  // namespace ckpt::analytics
