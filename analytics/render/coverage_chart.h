// The coverage chart of `ckpt coverage --svg`: one horizontal strip per epoch across the
// dataset's positions in that epoch's order (or across sample ids when an epoch mixed orders),
// green where visited, red where never visited, shaded in between when a pixel covers both;
// black ticks where a restarted process took its first step; the unique fraction at the right.
// Layers carry classes (epoch-strip, visited, never-visited, restart-mark).
//
// Pure function; thread-safe.
#pragma once

#include <string>

#include "analytics/coverage/coverage.h"

namespace ckpt::analytics {

std::string coverage_chart_svg(const CoverageReport& report, const std::string& source);

}  // namespace ckpt::analytics
