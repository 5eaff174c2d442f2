// The renderings of a coverage report that `ckpt coverage` prints: the JSON document (keys are a
// contract, docs/cli.md) and the text table. The command itself (flags, exit codes) lives in cli/.
//
// Pure functions of their inputs; thread-safe.
#pragma once

#include <nlohmann/json.hpp>
#include <ostream>
#include <string>
#include <vector>

#include "analytics/coverage/checkpoint_cursors.h"
#include "analytics/coverage/coverage.h"

namespace ckpt::analytics {

// `src` names the input (run directory or run-spec file); `checkpoints` may be empty.
nlohmann::json coverage_to_json(const CoverageReport& r, const CoverageInput& in,
                                const std::string& src,
                                const std::vector<CheckpointCursorCheck>& checkpoints);
void print_coverage_text(const CoverageReport& r, const CoverageInput& in, const std::string& src,
                         const std::vector<CheckpointCursorCheck>& checkpoints, std::ostream& out);

}  // namespace ckpt::analytics
