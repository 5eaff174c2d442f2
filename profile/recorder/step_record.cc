#include "profile/recorder/step_record.h"

namespace ckpt::profile {

namespace {
constexpr const char* kNames[kNumPhases] = {"data_wait",  "h2d",       "forward",
                                            "backward",   "optimizer", "collective",
                                            "checkpoint", "eval",      "other"};
}

const char* phase_name(Phase p) { return kNames[index(p)]; }

std::optional<Phase> phase_from_name(std::string_view name) {
  for (int i = 0; i < kNumPhases; ++i) {
    if (name == kNames[i]) return static_cast<Phase>(i);
  }
  return std::nullopt;
}

}  // namespace ckpt::profile
