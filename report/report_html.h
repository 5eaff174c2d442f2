// `ckpt report RUN_DIR --html FILE`: one self-contained HTML page about a run — the audit of its
// latest checkpoint (verify/audit), the LR chart across restarts, the dataset-coverage chart and,
// when profiler files are in the run directory, the step profiler's verdicts (profile/). Charts
// are inline SVG, styles inline, no scripts and no network. Each section is built independently:
// a section whose input is missing or unreadable says why in place, and the page is still written.
//
// A composition of the auditor (verify/), the analytics (analytics/) and the profiler (profile/):
// report/ sits above those siblings so that none of them includes another. The checkpoint is
// audited with the ReaderSet the program built (its caller's: report/ registers nothing). Pure
// apart from reading the run directory; thread-safe.
#pragma once

#include <string>

#include "ckpt/base/status.h"
#include "ckpt/io/env.h"
#include "verify/formats/format_reader.h"

namespace ckpt::report {

struct RunReport {
  std::string html;
  bool findings = false;  // incomplete checkpoint, LR discontinuities or off-schedule LRs
};

// On failure not_found when RUN_DIR is not a directory. Profiler files: RUN_DIR/profile-rank*.jsonl
// and RUN_DIR/profile/* (recorder files or PyTorch traces). The run directory, its LATEST and the
// checkpoint are read through `env`.
Result<RunReport> build_run_report(Env* env, const verify::ReaderSet& readers,
                                   const std::string& run_dir);

}  // namespace ckpt::report
