// Coverage input for our own runs: the visits and restart points of RUN/journal.jsonl. Every
// "progress" event is one step starting at the loader cursor it records and consuming
// S = batch × world × grad_accum positions of that epoch (clamped to the epoch's end); steps
// redone after a crash count again, because their samples really were trained on. When progress
// is logged less often than every step, the positions between two events of the same process are
// filled in (they were consumed in order). A restart mark is placed at the first step of every
// process after the first.
//
// Free functions on values; thread-safe.
#pragma once

#include <string>

#include "analytics/coverage/coverage.h"
#include "analytics/input/run_journal.h"
#include "ckpt/base/status.h"

namespace ckpt::analytics {

// On failure corrupt naming the journal line: progress before any start with a sampler, a
// sampler kind we do not know, a cursor beyond the epoch, or a change of dataset, seed or order
// between processes (coverage compares one dataset).
Result<CoverageInput> coverage_input_from_journal(const RunJournal& journal);
Result<CoverageInput> coverage_input_from_run(Env* env, const std::string& run_dir);

}  // namespace ckpt::analytics
