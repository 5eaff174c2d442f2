// The names of training state, in one place.
//
// Two vocabularies, on purpose, and the one mapping between them:
//   - Component: what a rank file stores, one HDF5 group each (docs/format.md): model, optimizer,
//     scheduler, rng, loader, train, extra. The Checkpointer tracks, omits and requires these.
//   - AuditComponent: the completeness contract the auditor reports (DESIGN.md), finer where a
//     foreign checkpoint can have one half without the other: rng_cpu / rng_cuda (both live in
//     /rng), counters and grad_scaler (both live in /train).
// The names are contracts (JSON keys, CLI flags, group names): never rename one.
#pragma once

#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "ckpt/base/status.h"

namespace ckpt {

enum class Component { kModel, kOptimizer, kScheduler, kRng, kLoader, kTrain, kExtra };
// Format v1's groups, in the order they are written.
inline constexpr Component kComponents[] = {
    Component::kModel,  Component::kOptimizer, Component::kScheduler, Component::kRng,
    Component::kLoader, Component::kTrain,     Component::kExtra};

enum class AuditComponent {
  kModel,
  kOptimizer,
  kScheduler,
  kRngCpu,
  kRngCuda,
  kLoader,
  kCounters,
  kGradScaler
};
// The contract, in report order.
inline constexpr AuditComponent kAuditComponents[] = {
    AuditComponent::kModel,    AuditComponent::kOptimizer, AuditComponent::kScheduler,
    AuditComponent::kRngCpu,   AuditComponent::kRngCuda,   AuditComponent::kLoader,
    AuditComponent::kCounters, AuditComponent::kGradScaler};

const char* component_name(Component c);       // "model" … "extra": the group name
const char* component_name(AuditComponent c);  // "model" … "rng_cpu" … "grad_scaler"
std::optional<Component> component_from_name(std::string_view name);
std::optional<AuditComponent> audit_component_from_name(std::string_view name);
// The group that holds an audited component in our format: rng_cpu, rng_cuda → rng;
// counters, grad_scaler → train; the others their namesake.
Component stored_in(AuditComponent c);

// Names from outside (flags, JSON, Python): invalid_argument naming the unknown one and the
// accepted names, so a typo is never silently ignored.
Result<std::set<Component>> parse_components(const std::vector<std::string>& names);
Result<std::set<AuditComponent>> parse_audit_components(const std::vector<std::string>& names);
std::vector<std::string> component_names(const std::set<Component>& set);

}  // namespace ckpt
