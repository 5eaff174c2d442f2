// The LR chart of `ckpt lr --svg`: learning rate against step, the expected schedule dotted when
// the spec is known, restart boundaries as dashed vertical lines, and every discontinuity
// highlighted (a red bar from the LR before to the LR after, a circle on the new level, its kind
// as a label). Element classes (lr-series, expected, restart, discontinuity) name each layer so
// tests and the HTML report can find them.
//
// Pure function; thread-safe.
#pragma once

#include <string>

#include "analytics/lr/lr_analysis.h"
#include "analytics/lr/lr_input.h"

namespace ckpt::analytics {

std::string lr_chart_svg(const LrSeries& series, const LrAnalysis& analysis);

}  // namespace ckpt::analytics
