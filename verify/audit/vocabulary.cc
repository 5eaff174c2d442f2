#include "verify/audit/vocabulary.h"

namespace ckpt::verify {

const char* status_name(ComponentStatus s) {
  switch (s) {
    case ComponentStatus::kPresent:
      return "present";
    case ComponentStatus::kMissing:
      return "missing";
    case ComponentStatus::kEmpty:
      return "empty";
    case ComponentStatus::kInconsistent:
      return "inconsistent";
    case ComponentStatus::kNotApplicable:
      return "not_applicable";
    case ComponentStatus::kDerived:
      return "derived";
    case ComponentStatus::kUnknown:
      return "unknown";
  }
  return "?";
}

std::optional<ComponentStatus> status_from_name(std::string_view name) {
  for (ComponentStatus s : kComponentStatuses) {
    if (name == status_name(s)) return s;
  }
  return std::nullopt;
}

bool status_is_ok(ComponentStatus s) {
  return s == ComponentStatus::kPresent || s == ComponentStatus::kNotApplicable ||
         s == ComponentStatus::kDerived || s == ComponentStatus::kUnknown;
}

}  // namespace ckpt::verify
