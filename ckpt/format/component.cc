#include "ckpt/format/component.h"

#include <iterator>

namespace ckpt {
namespace {

template <typename E, size_t N>
std::optional<E> find_name(const E (&all)[N], std::string_view name) {
  for (E e : all) {
    if (name == component_name(e)) return e;
  }
  return std::nullopt;
}

template <typename E, size_t N>
Result<std::set<E>> parse(const E (&all)[N], const std::vector<std::string>& names) {
  std::set<E> out;
  for (const std::string& n : names) {
    std::optional<E> e = find_name(all, n);
    if (!e) {
      std::string accepted;
      for (E a : all) accepted += (accepted.empty() ? "" : ", ") + std::string(component_name(a));
      return invalid_argument("unknown component \"" + n + "\" (expected one of " + accepted + ")");
    }
    out.insert(*e);
  }
  return out;
}

// The one name table of each enum, indexed by its value (the enums count from 0 in table order).
constexpr const char* kComponentNames[] = {"model",  "optimizer", "scheduler", "rng",
                                           "loader", "train",     "extra"};
static_assert(std::size(kComponentNames) == std::size(kComponents));
constexpr const char* kAuditComponentNames[] = {
    "model", "optimizer", "scheduler", "rng_cpu", "rng_cuda", "loader", "counters", "grad_scaler"};
static_assert(std::size(kAuditComponentNames) == std::size(kAuditComponents));

template <typename E, size_t N>
constexpr bool in_table_order(const E (&all)[N]) {
  for (size_t i = 0; i < N; ++i) {
    if (static_cast<size_t>(all[i]) != i) return false;
  }
  return true;
}
static_assert(in_table_order(kComponents) && in_table_order(kAuditComponents));

}  // namespace

const char* component_name(Component c) {
  const auto i = static_cast<size_t>(c);
  return i < std::size(kComponentNames) ? kComponentNames[i] : "?";
}

const char* component_name(AuditComponent c) {
  const auto i = static_cast<size_t>(c);
  return i < std::size(kAuditComponentNames) ? kAuditComponentNames[i] : "?";
}

std::optional<Component> component_from_name(std::string_view name) {
  return find_name(kComponents, name);
}

std::optional<AuditComponent> audit_component_from_name(std::string_view name) {
  return find_name(kAuditComponents, name);
}

Component stored_in(AuditComponent c) {
  switch (c) {
    case AuditComponent::kModel:
      return Component::kModel;
    case AuditComponent::kOptimizer:
      return Component::kOptimizer;
    case AuditComponent::kScheduler:
      return Component::kScheduler;
    case AuditComponent::kRngCpu:
    case AuditComponent::kRngCuda:
      return Component::kRng;
    case AuditComponent::kLoader:
      return Component::kLoader;
    case AuditComponent::kCounters:
    case AuditComponent::kGradScaler:
      return Component::kTrain;
  }
  return Component::kExtra;
}

Result<std::set<Component>> parse_components(const std::vector<std::string>& names) {
  return parse(kComponents, names);
}

Result<std::set<AuditComponent>> parse_audit_components(const std::vector<std::string>& names) {
  return parse(kAuditComponents, names);
}

std::vector<std::string> component_names(const std::set<Component>& set) {
  std::vector<std::string> out;
  out.reserve(set.size());
  for (Component c : set) out.push_back(component_name(c));
  return out;
}

}  // namespace ckpt
