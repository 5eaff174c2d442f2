// The renderings of an LR analysis that `ckpt lr` prints: the JSON document (keys are a contract,
// docs/cli.md) and the text report. The command itself (flags, exit codes) lives in cli/.
//
// Pure functions of their inputs; thread-safe.
#pragma once

#include <nlohmann/json.hpp>
#include <ostream>
#include <vector>

#include "analytics/lr/lr_analysis.h"
#include "analytics/lr/lr_input.h"

namespace ckpt::analytics {

// One series: source, format, points, restarts, schedule_known, discontinuities, restart_checks,
// tag, inferred_restarts, redone_steps, launches.
nlohmann::json lr_to_json(const LrSeries& s, const LrAnalysis& a);
// Every series of a log (at least one; analyses[i] of series[i]): the first series' keys at the
// top level (as lr_to_json), "warnings", and "series": one lr_to_json object per series.
nlohmann::json lr_log_to_json(const std::vector<LrSeries>& series,
                              const std::vector<LrAnalysis>& analyses);
void print_lr_text(const LrSeries& s, const LrAnalysis& a, std::ostream& out);
void print_lr_log_text(const std::vector<LrSeries>& series, const std::vector<LrAnalysis>& analyses,
                       std::ostream& out);

}  // namespace ckpt::analytics
