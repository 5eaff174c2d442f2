// The audit's closed vocabulary of a component's status, an enum with one name table
// (verify/audit/vocabulary.cc). The components themselves are ckpt::AuditComponent
// (ckpt/format/component.h); a finding's severity is the readers' (verify/formats/view.h). The
// names are contracts (`ckpt audit --json`, the text table, `ckpt diff`): never rename one.
#pragma once

#include <optional>
#include <string_view>

#include "ckpt/format/component.h"

namespace ckpt::verify {

using ckpt::AuditComponent;

// present, missing, empty, inconsistent, not_applicable, derived, unknown. `unknown`: the state is
// there but a rule could not decide whether it is right (a `warning` finding says what it would
// need); it does not make the checkpoint incomplete.
enum class ComponentStatus {
  kPresent,
  kMissing,
  kEmpty,
  kInconsistent,
  kNotApplicable,
  kDerived,
  kUnknown
};
inline constexpr ComponentStatus kComponentStatuses[] = {
    ComponentStatus::kPresent,      ComponentStatus::kMissing,       ComponentStatus::kEmpty,
    ComponentStatus::kInconsistent, ComponentStatus::kNotApplicable, ComponentStatus::kDerived,
    ComponentStatus::kUnknown};

const char* status_name(ComponentStatus s);
std::optional<ComponentStatus> status_from_name(std::string_view name);

// True for statuses that do not make a required component fail: present, not_applicable,
// derived, unknown.
bool status_is_ok(ComponentStatus s);

}  // namespace ckpt::verify
