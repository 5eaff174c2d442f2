// The audit rules: from a CheckpointView to a status per component of the completeness contract
// (DESIGN.md) with evidence, consequence and fix, plus findings. Format-independent: the same
// rules judge a torch.save file, an HF folder, a Lightning .ckpt, a DCP folder or our own format.
//
// Statuses: present, missing, empty, inconsistent, not_applicable, derived. Consistency checks:
// moments for every parameter listed in param_groups; optimizer step vs global step; scheduler
// last_epoch vs global step (or epoch, for per-epoch schedulers); group LR vs scheduler _last_lr;
// RNG state sizes; loader cursor vs step; reader findings (CRC, NaN/Inf, zero moments, unsafe
// globals). Pure functions; thread-safe.
#pragma once

#include <optional>
#include <set>
#include <string>
#include <vector>

#include "verify/audit/vocabulary.h"
#include "verify/formats/view.h"

namespace ckpt::verify {

// The contract's components are ckpt::kAuditComponents, in report order. grad_scaler is
// reported not_applicable unless mixed precision is detected.

struct ComponentReport {
  AuditComponent component = AuditComponent::kModel;
  ComponentStatus status = ComponentStatus::kMissing;
  std::string evidence;
  std::string consequence;  // what happens to the run (DOMAIN.md); empty when fine
  std::string fix;
  bool required = true;
};

struct Finding {
  Severity severity = Severity::kError;
  std::optional<AuditComponent> component;  // nullopt = the checkpoint as a whole
  std::string message;
};

struct AuditReport {
  std::string path;
  CheckpointFormat format = CheckpointFormat::kTorchSave;
  bool complete = false;
  std::vector<ComponentReport> components;
  std::vector<Finding> findings;
  uint64_t bytes_read = 0;
  const ComponentReport* find(AuditComponent c) const;
};

// Judges `view`. `required` = the components whose status decides `complete` (empty = all of
// them). A component outside `required` that is not fine yields a warning instead of an error;
// error findings about the file itself (corruption, unsafe globals) always count.
AuditReport apply_rules(const CheckpointView& view, const std::set<AuditComponent>& required);

}  // namespace ckpt::verify
