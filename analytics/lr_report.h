// The renderings of an LR analysis that `ckpt lr` prints: the JSON document (keys are a contract,
// docs/cli.md) and the text report. The command itself (flags, exit codes) lives in cli/.
//
// Pure functions of their inputs; thread-safe.
#pragma once

#include <nlohmann/json.hpp>
#include <ostream>

#include "analytics/lr_analysis.h"
#include "analytics/lr_input.h"

namespace ckpt::analytics {

nlohmann::json lr_to_json(const LrSeries& s, const LrAnalysis& a);
void print_lr_text(const LrSeries& s, const LrAnalysis& a, std::ostream& out);

}  // namespace ckpt::analytics
