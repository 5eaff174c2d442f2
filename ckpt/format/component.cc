#include "ckpt/format/component.h"

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

}  // namespace

const char* component_name(Component c) {
  switch (c) {
    case Component::kModel:
      return "model";
    case Component::kOptimizer:
      return "optimizer";
    case Component::kScheduler:
      return "scheduler";
    case Component::kRng:
      return "rng";
    case Component::kLoader:
      return "loader";
    case Component::kTrain:
      return "train";
    case Component::kExtra:
      return "extra";
  }
  return "?";
}

const char* component_name(AuditComponent c) {
  switch (c) {
    case AuditComponent::kModel:
      return "model";
    case AuditComponent::kOptimizer:
      return "optimizer";
    case AuditComponent::kScheduler:
      return "scheduler";
    case AuditComponent::kRngCpu:
      return "rng_cpu";
    case AuditComponent::kRngCuda:
      return "rng_cuda";
    case AuditComponent::kLoader:
      return "loader";
    case AuditComponent::kCounters:
      return "counters";
    case AuditComponent::kGradScaler:
      return "grad_scaler";
  }
  return "?";
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
