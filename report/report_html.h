// `ckpt report RUN_DIR --html FILE`: one self-contained HTML page about a run — the audit of its
// latest checkpoint (verify/audit), the LR chart across restarts, the dataset-coverage chart and,
// when profiler files are in the run directory, the step profiler's verdicts (profile/). Charts
// are inline SVG, styles inline, no scripts and no network. Each section is built independently:
// a section whose input is missing or unreadable says why in place, and the page is still written.
//
// A composition of the auditor (verify/), the analytics (analytics/) and the profiler (profile/):
// report/ sits above those siblings so that none of them includes another. Pure apart from reading
// the run directory; thread-safe.
#pragma once

#include <string>

#include "ckpt/base/status.h"

namespace ckpt::report {

struct RunReport {
  std::string html;
  bool findings = false;  // incomplete checkpoint, LR discontinuities or off-schedule LRs
};

// On failure not_found when RUN_DIR is not a directory. Profiler files: RUN_DIR/profile-rank*.jsonl
// and RUN_DIR/profile/* (recorder files or PyTorch traces).
Result<RunReport> build_run_report(const std::string& run_dir);

}  // namespace ckpt::report
