// Renderings of an analyzer Report: the human text report, the `--json` document, and the SVG
// chart (step time and data wait over steps, one line per rank, verdicts annotated). Pure
// functions of the Report; thread-safe.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "profile/analyze/analyzer.h"

namespace ckpt::profile {

// {"ranks","steps","step_time":{"mean","p50","p99"},"breakdown":{phase: fraction},
//  "verdicts":[{"id","confidence","evidence",("rank"),("period_steps")}]}, primary verdict first.
nlohmann::json report_json(const Report& r);

// JSON text for stdout (indent 2, newline-terminated) that never throws on bytes that are not
// UTF-8 (file names, environment variables, trace strings): they become U+FFFD.
std::string json_text(const nlohmann::json& j);

// The text report, in the order of the checks, with next measurements, fixes and what to decline.
std::string report_text(const Report& r);

// A self-contained SVG document.
std::string report_svg(const Report& r);

}  // namespace ckpt::profile
