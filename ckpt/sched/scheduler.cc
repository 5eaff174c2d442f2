#include "ckpt/sched/scheduler.h"

#include <algorithm>
#include <cmath>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

namespace ckpt::sched {
namespace {

Status ill_typed(const std::string& name, const AttrValue& v, const char* expected) {
  return corrupt("scheduler: attribute \"" + name + "\" is " + attr_type_name(v) + ", expected " +
                 expected);
}

// Reads an optional double (an int64 converts) into *out.
Status read_double(const Node& n, const std::string& name, double* out) {
  const AttrValue* v = n.find_attr(name);
  if (v == nullptr) return Status::ok();
  if (auto p = std::get_if<double>(v)) {
    *out = *p;
  } else if (auto q = std::get_if<int64_t>(v)) {
    *out = static_cast<double>(*q);
  } else {
    return ill_typed(name, *v, "a double");
  }
  return Status::ok();
}

Status read_int(const Node& n, const std::string& name, int64_t* out) {
  const AttrValue* v = n.find_attr(name);
  if (v == nullptr) return Status::ok();
  if (auto p = std::get_if<int64_t>(v)) {
    *out = *p;
    return Status::ok();
  }
  return ill_typed(name, *v, "an int64");
}

std::string num(double v) {
  std::ostringstream os;
  os.precision(17);
  os << v;
  return os.str();
}

}  // namespace

bool lr_close(double a, double b, double tol) {
  if (a == b) return true;
  return std::fabs(a - b) <= tol * std::max(std::fabs(a), std::fabs(b));
}

Scheduler::Scheduler(ScheduleSpec s) {
  Result<ScheduleSpec> v = validate(std::move(s));
  if (!v.is_ok()) throw std::invalid_argument(v.status().to_string());
  spec_ = std::move(v).value();
  set_last_step(0);
}

Scheduler::Scheduler(ScheduleSpec validated, int64_t last_step, bool)
    : spec_(std::move(validated)) {
  set_last_step(last_step);
}

Result<Scheduler> Scheduler::create(ScheduleSpec s, int64_t last_step) {
  CKPT_ASSIGN_OR_RETURN(ScheduleSpec v, validate(std::move(s)));
  if (last_step < 0) {
    return invalid_argument("scheduler: last_step must be >= 0, got " + std::to_string(last_step));
  }
  return Scheduler(std::move(v), last_step, true);
}

double Scheduler::step() {
  set_last_step(last_step_ + 1);
  return last_lr_;
}

void Scheduler::set_last_step(int64_t step) {
  if (step < 0) {
    throw std::invalid_argument("scheduler: last_step must be >= 0, got " + std::to_string(step));
  }
  last_step_ = step;
  last_lr_ = lr_at(spec_, step);
}

void Scheduler::to_node(Node* node) const {
  auto& a = node->attrs;
  a["kind"] = std::string(schedule_kind_name(spec_.kind));
  a["base_lr"] = spec_.base_lr;
  a["warmup_steps"] = spec_.warmup_steps;
  a["total_steps"] = spec_.total_steps;
  a["min_lr"] = spec_.min_lr;
  a["power"] = spec_.power;
  a["step_size"] = spec_.step_size;
  a["gamma"] = spec_.gamma;
  a["milestones"] = spec_.milestones;
  a["max_lr"] = spec_.max_lr;
  a["pct_start"] = spec_.pct_start;
  a["div_factor"] = spec_.div_factor;
  a["final_div_factor"] = spec_.final_div_factor;
  a["warmup_start_factor"] = spec_.warmup_start_factor;
  a["last_step"] = last_step_;
  a["last_lr"] = last_lr_;
}

Result<ScheduleSpec> spec_from_node(const Node& n) {
  ScheduleSpec s;
  const AttrValue* kind = n.find_attr("kind");
  if (kind == nullptr) return corrupt("scheduler: attribute \"kind\" is missing");
  if (auto p = std::get_if<std::string>(kind)) {
    Result<ScheduleKind> k = schedule_kind_from_name(*p);
    if (!k.is_ok()) return corrupt("scheduler: " + k.status().message());
    s.kind = *k;
  } else {
    return ill_typed("kind", *kind, "a string");
  }
  const std::pair<const char*, double*> doubles[] = {
      {"base_lr", &s.base_lr},
      {"min_lr", &s.min_lr},
      {"power", &s.power},
      {"gamma", &s.gamma},
      {"max_lr", &s.max_lr},
      {"pct_start", &s.pct_start},
      {"div_factor", &s.div_factor},
      {"final_div_factor", &s.final_div_factor},
      {"warmup_start_factor", &s.warmup_start_factor}};
  for (const auto& [name, field] : doubles) CKPT_RETURN_IF_ERROR(read_double(n, name, field));
  const std::pair<const char*, int64_t*> ints[] = {{"warmup_steps", &s.warmup_steps},
                                                   {"total_steps", &s.total_steps},
                                                   {"step_size", &s.step_size}};
  for (const auto& [name, field] : ints) CKPT_RETURN_IF_ERROR(read_int(n, name, field));
  if (const AttrValue* m = n.find_attr("milestones")) {
    if (auto p = std::get_if<std::vector<int64_t>>(m)) {
      s.milestones = *p;
    } else if (auto q = std::get_if<std::vector<double>>(m); q != nullptr && q->empty()) {
      // An empty array has no element type to speak of once it has been through HDF5.
      s.milestones.clear();
    } else {
      return ill_typed("milestones", *m, "an int64 array");
    }
  }
  Result<ScheduleSpec> v = validate(std::move(s));
  if (!v.is_ok()) return corrupt("scheduler: " + v.status().message());
  return v;
}

Result<Scheduler> Scheduler::from_node(const Node& n) {
  CKPT_ASSIGN_OR_RETURN(ScheduleSpec spec, spec_from_node(n));
  const AttrValue* ls = n.find_attr("last_step");
  if (ls == nullptr) return corrupt("scheduler: attribute \"last_step\" is missing");
  const int64_t* last_step = std::get_if<int64_t>(ls);
  if (last_step == nullptr) return ill_typed("last_step", *ls, "an int64");
  if (*last_step < 0) {
    return corrupt("scheduler: attribute \"last_step\" = " + std::to_string(*last_step) +
                   ", expected >= 0");
  }
  Scheduler out(std::move(spec), *last_step, true);
  if (n.find_attr("last_lr") != nullptr) {
    double recorded = 0;
    CKPT_RETURN_IF_ERROR(read_double(n, "last_lr", &recorded));
    if (!lr_close(recorded, out.lr())) {
      return corrupt("scheduler: last_lr " + num(recorded) + " disagrees with the \"" +
                     schedule_kind_name(out.spec().kind) + "\" schedule at last_step " +
                     std::to_string(*last_step) + " (expected " + num(out.lr()) + ")");
    }
  }
  return out;
}

}  // namespace ckpt::sched
