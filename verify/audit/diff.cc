#include "verify/audit/diff.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <map>
#include <sstream>

#include "verify/formats/format_reader.h"

namespace ckpt::verify {
namespace {

std::string fmt(double x) {
  std::ostringstream o;
  o.precision(8);
  o << x;
  return o.str();
}

bool same_number(double a, double b) {
  return std::fabs(a - b) <= 1e-9 * std::max(std::fabs(a), std::fabs(b));
}

std::string tensor_text(const TensorInfo& t) {
  std::string s = t.dtype.name() + " [";
  for (size_t i = 0; i < t.shape.size(); ++i) s += (i ? "," : "") + std::to_string(t.shape[i]);
  return s + "]";
}

std::vector<const OptimizerPart*> optimizers(const CheckpointView& v) {
  std::vector<const OptimizerPart*> out;
  if (v.optimizer.found) out.push_back(&v.optimizer);
  for (const auto& o : v.more_optimizers) out.push_back(&o);
  return out;
}

DiffCounters counters_of(const CheckpointView& v) {
  DiffCounters c;
  c.global_step = v.counters.global_step;
  c.epoch = v.counters.epoch;
  for (const auto& ps : v.optimizer.state) {
    if (ps.step) {
      c.optimizer_step = ps.step;
      break;
    }
  }
  if (v.scheduler.found) c.scheduler_last_epoch = v.scheduler.last_epoch;
  c.samples = v.loader.samples;
  return c;
}

std::vector<double> lrs_of(const CheckpointView& v) {
  std::vector<double> out;
  for (const OptimizerPart* o : optimizers(v)) {
    for (const auto& g : o->groups) {
      if (g.lr) out.push_back(*g.lr);
    }
  }
  return out;
}

// The hyperparameters both formats expose through the view, as key → text.
std::map<std::string, std::string> hypers_of(const CheckpointView& v) {
  std::map<std::string, std::string> h;
  const auto opts = optimizers(v);
  for (size_t i = 0; i < opts.size(); ++i) {
    const std::string p = opts.size() == 1 ? "optimizer" : "optimizer[" + std::to_string(i) + "]";
    h[p + ".kind"] = opts[i]->kind;
    for (size_t g = 0; g < opts[i]->groups.size(); ++g) {
      const auto& grp = opts[i]->groups[g];
      const std::string k = p + ".param_groups[" + std::to_string(g) + "]";
      if (grp.momentum) h[k + ".momentum"] = fmt(*grp.momentum);
      h[k + ".params"] = std::to_string(grp.params.size());
    }
  }
  if (v.scheduler.found) {
    h["scheduler.kind"] = v.scheduler.kind;
    for (size_t i = 0; i < v.scheduler.base_lrs.size(); ++i)
      h["scheduler.base_lrs[" + std::to_string(i) + "]"] = fmt(v.scheduler.base_lrs[i]);
  }
  if (v.grad_scaler.found && v.grad_scaler.scale)
    h["grad_scaler.scale"] = fmt(*v.grad_scaler.scale);
  if (v.loader.found && !v.loader.kind.empty()) h["loader.kind"] = v.loader.kind;
  return h;
}

template <typename T>
bool same_opt(const std::optional<T>& a, const std::optional<T>& b) {
  if (a.has_value() != b.has_value()) return false;
  return !a || same_number(static_cast<double>(*a), static_cast<double>(*b));
}

// The number of counters that differ (each is one row of the text table).
int counters_differing(const DiffCounters& a, const DiffCounters& b) {
  return !same_opt(a.global_step, b.global_step) + !same_opt(a.epoch, b.epoch) +
         !same_opt(a.optimizer_step, b.optimizer_step) +
         !same_opt(a.scheduler_last_epoch, b.scheduler_last_epoch) +
         !same_opt(a.samples, b.samples);
}

bool same_lrs(const std::vector<double>& a, const std::vector<double>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!same_number(a[i], b[i])) return false;
  }
  return true;
}

void diff_tensors(const CheckpointView& a, const CheckpointView& b, bool deep, CheckpointDiff* d) {
  std::map<std::string, const TensorInfo*> ta, tb;
  for (const auto& t : a.model.tensors) ta[t.name] = &t;
  for (const auto& t : b.model.tensors) tb[t.name] = &t;
  for (const auto& [n, t] : ta) {
    auto it = tb.find(n);
    if (it == tb.end()) {
      d->only_a.push_back(n);
    } else if (t->dtype != it->second->dtype || t->shape != it->second->shape) {
      d->changed.push_back({n, tensor_text(*t), tensor_text(*it->second), std::nullopt});
    } else if (deep && t->values && it->second->values) {
      if (*t->values == *it->second->values) {
        ++d->tensors_same;
        ++d->tensors_by_value;
      } else {
        d->changed.push_back({n, tensor_text(*t), tensor_text(*it->second),
                              max_abs_difference(t->dtype, *t->values, *it->second->values)});
      }
    } else {
      ++d->tensors_same;
      if (deep) ++d->tensors_unread;
    }
  }
  for (const auto& [n, t] : tb) {
    if (ta.count(n) == 0) d->only_b.push_back(n);
  }
}

// Why `v` says `missing` for `c` only because its format cannot record what decides it; ""
// when it can.
std::string format_cannot_tell(const CheckpointView& v, AuditComponent c) {
  if (c == AuditComponent::kRngCuda && !v.devices_known) return "records no devices";
  if (v.format_gaps.count(c) != 0) return "does not save it";
  return "";
}

// The note for a status pair that is no difference in state (CheckpointDiff::Status2::note): one
// side `missing` because its format cannot tell, the other `not_applicable`; "" otherwise.
std::string status_note(const CheckpointView& a, const CheckpointView& b, AuditComponent c,
                        ComponentStatus sa, ComponentStatus sb) {
  using S = ComponentStatus;
  std::string why;
  const CheckpointView* unsure = nullptr;
  if (sa == S::kMissing && sb == S::kNotApplicable) {
    why = format_cannot_tell(a, c);
    unsure = &a;
  } else if (sb == S::kMissing && sa == S::kNotApplicable) {
    why = format_cannot_tell(b, c);
    unsure = &b;
  }
  if (why.empty()) return "";
  return std::string(component_name(c)) + " " + status_name(sa) + " in A, " + status_name(sb) +
         " in B: not counted, " + format_name(unsure->format) + " (" + (unsure == &a ? "A" : "B") +
         ") " + why;
}

nlohmann::json opt_json(const std::optional<std::string>& s) {
  return s ? nlohmann::json(*s) : nlohmann::json(nullptr);
}

template <typename T>
nlohmann::json num_json(const std::optional<T>& x) {
  return x ? nlohmann::json(*x) : nlohmann::json(nullptr);
}

nlohmann::json counters_json(const DiffCounters& c) {
  return {{"global_step", num_json(c.global_step)},
          {"epoch", num_json(c.epoch)},
          {"optimizer_step", num_json(c.optimizer_step)},
          {"scheduler_last_epoch", num_json(c.scheduler_last_epoch)},
          {"samples", num_json(c.samples)}};
}

}  // namespace

std::optional<double> max_abs_difference(const AnyDType& dtype, const std::string& a,
                                         const std::string& b) {
  if (!dtype.known()) return std::nullopt;
  const DType t = *dtype.known();
  const size_t es = dtype_size(t);
  if (a.size() != b.size() || a.size() % es != 0) return std::nullopt;
  double worst = 0;
  for (size_t i = 0; i < a.size(); i += es) {
    auto x = dtype_element(t, a.data() + i), y = dtype_element(t, b.data() + i);
    if (!x || !y) return std::nullopt;
    if (std::isnan(*x) != std::isnan(*y)) return std::nan("");
    if (std::isnan(*x)) continue;
    const double diff = *x == *y ? 0.0 : std::fabs(*x - *y);  // equal infinities: 0
    if (diff > worst || std::isnan(diff)) worst = diff;
  }
  return worst;
}

CheckpointDiff diff_views(const CheckpointView& a, const CheckpointView& b) {
  CheckpointDiff d;
  d.a = a.path;
  d.b = b.path;
  d.format_a = a.format;
  d.format_b = b.format;
  const AuditReport ra = apply_rules(a, {}), rb = apply_rules(b, {});
  for (AuditComponent c : kAuditComponents) {
    const ComponentStatus sa = ra.find(c)->status, sb = rb.find(c)->status;
    d.components.push_back({c, sa, sb, sa == sb ? "" : status_note(a, b, c, sa, sb)});
    if (sa != sb && d.components.back().note.empty()) ++d.differences;
  }
  d.counters_a = counters_of(a);
  d.counters_b = counters_of(b);
  d.differences += counters_differing(d.counters_a, d.counters_b);
  d.lr_a = lrs_of(a);
  d.lr_b = lrs_of(b);
  if (!same_lrs(d.lr_a, d.lr_b)) ++d.differences;
  const auto ha = hypers_of(a), hb = hypers_of(b);
  std::map<std::string, std::pair<std::string, std::string>> all;
  for (const auto& [k, v] : ha) all[k].first = v;
  for (const auto& [k, v] : hb) all[k].second = v;
  for (const auto& [k, v] : all) {
    if (v.first == v.second) {
      ++d.hyperparameters_same;
    } else {
      d.hyperparameters.push_back({k, v.first, v.second});
      ++d.differences;
    }
  }
  d.deep = std::any_of(a.model.tensors.begin(), a.model.tensors.end(),
                       [](const TensorInfo& t) { return t.values != nullptr; }) ||
           std::any_of(b.model.tensors.begin(), b.model.tensors.end(),
                       [](const TensorInfo& t) { return t.values != nullptr; });
  diff_tensors(a, b, d.deep, &d);
  d.differences += static_cast<int>(d.only_a.size() + d.only_b.size() + d.changed.size());
  d.config = {a.config_digest, b.config_digest};
  d.environment = {a.environment_digest, b.environment_digest};
  if (d.config.a != d.config.b) ++d.differences;
  if (d.environment.a != d.environment.b) ++d.differences;
  return d;
}

Result<CheckpointDiff> diff_paths(const ReaderSet& readers, Env* env, const std::string& a,
                                  const std::string& b, bool deep) {
  ReadOptions ro;
  ro.inspect = false;
  ro.tensor_values = deep;
  CKPT_ASSIGN_OR_RETURN(CheckpointView va, readers.read(env, a, ro));
  CKPT_ASSIGN_OR_RETURN(CheckpointView vb, readers.read(env, b, ro));
  CheckpointDiff d = diff_views(va, vb);
  d.deep = deep;
  return d;
}

nlohmann::json diff_to_json(const CheckpointDiff& d) {
  nlohmann::json comps = nlohmann::json::object();
  nlohmann::json notes = nlohmann::json::array();
  for (const auto& c : d.components) {
    comps[component_name(c.component)] = {{"a", status_name(c.a)}, {"b", status_name(c.b)}};
    if (!c.note.empty()) notes.push_back(c.note);
  }
  nlohmann::json hyper = nlohmann::json::array();
  for (const auto& h : d.hyperparameters) {
    hyper.push_back({{"key", h.key},
                     {"a", h.a.empty() ? nlohmann::json(nullptr) : nlohmann::json(h.a)},
                     {"b", h.b.empty() ? nlohmann::json(nullptr) : nlohmann::json(h.b)}});
  }
  nlohmann::json changed = nlohmann::json::array();
  for (const auto& t : d.changed) {
    nlohmann::json c = {{"name", t.name}, {"a", t.a}, {"b", t.b}};
    if (t.a == t.b) {  // --deep: the values differ
      c["max_abs_diff"] = t.max_abs_diff && !std::isnan(*t.max_abs_diff)
                              ? nlohmann::json(*t.max_abs_diff)
                              : nlohmann::json(nullptr);
    }
    changed.push_back(c);
  }
  return {
      {"a", d.a},
      {"b", d.b},
      {"differences", d.differences},
      {"components", comps},
      {"counters", {{"a", counters_json(d.counters_a)}, {"b", counters_json(d.counters_b)}}},
      {"lr", {{"a", d.lr_a}, {"b", d.lr_b}}},
      {"hyperparameters", hyper},
      {"tensors", {{"only_a", d.only_a}, {"only_b", d.only_b}, {"changed", changed}}},
      {"notes", notes},
      {"digests",
       {{"config", {{"a", opt_json(d.config.a)}, {"b", opt_json(d.config.b)}}},
        {"environment", {{"a", opt_json(d.environment.a)}, {"b", opt_json(d.environment.b)}}}}}};
}

namespace {

std::string pad(const std::string& s, size_t w) {
  return s.size() >= w ? s + " " : s + std::string(w - s.size(), ' ');
}

template <typename T>
std::string num_text(const std::optional<T>& x) {
  return x ? fmt(static_cast<double>(*x)) : "-";
}

std::string list_text(const std::vector<double>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + fmt(v[i]);
  return s + "]";
}

}  // namespace

std::string diff_to_text(const CheckpointDiff& d) {
  std::ostringstream o;
  o << "A: " << d.a << "  (" << format_name(d.format_a) << ")\nB: " << d.b << "  ("
    << format_name(d.format_b) << ")\n\n";
  std::vector<std::string> same;
  std::vector<std::array<std::string, 3>> rows;
  for (const auto& c : d.components) {
    if (c.a == c.b) continue;
    if (c.note.empty())
      rows.push_back({component_name(c.component), status_name(c.a), status_name(c.b)});
  }
  const auto noted = std::count_if(d.components.begin(), d.components.end(),
                                   [](const auto& c) { return !c.note.empty(); });
  if (rows.empty())
    same.push_back(noted == 0 ? std::string("component statuses")
                              : "component statuses (" + std::to_string(noted) + " noted below)");
  auto row_if = [&](const std::string& what, const std::string& a, const std::string& b) {
    if (a != b) rows.push_back({what, a, b});
  };
  const size_t before = rows.size();
  row_if("global_step", num_text(d.counters_a.global_step), num_text(d.counters_b.global_step));
  row_if("epoch", num_text(d.counters_a.epoch), num_text(d.counters_b.epoch));
  row_if("optimizer step", num_text(d.counters_a.optimizer_step),
         num_text(d.counters_b.optimizer_step));
  row_if("scheduler last_epoch", num_text(d.counters_a.scheduler_last_epoch),
         num_text(d.counters_b.scheduler_last_epoch));
  row_if("samples", num_text(d.counters_a.samples), num_text(d.counters_b.samples));
  if (rows.size() == before) same.push_back("counters");
  if (same_lrs(d.lr_a, d.lr_b)) {
    same.push_back("lr " + list_text(d.lr_a));
  } else {
    rows.push_back({"lr", list_text(d.lr_a), list_text(d.lr_b)});
  }
  for (const auto& h : d.hyperparameters)
    rows.push_back({h.key, h.a.empty() ? "-" : h.a, h.b.empty() ? "-" : h.b});
  if (d.hyperparameters_same > 0)
    same.push_back(std::to_string(d.hyperparameters_same) + " hyperparameters");
  for (const auto& n : d.only_a) rows.push_back({"tensor " + n, "present", "-"});
  for (const auto& n : d.only_b) rows.push_back({"tensor " + n, "-", "present"});
  for (const auto& t : d.changed) {
    if (t.a != t.b) {
      rows.push_back({"tensor " + t.name, t.a, t.b});
    } else {
      rows.push_back(
          {"tensor " + t.name + " values", t.a,
           t.b + (t.max_abs_diff ? ", max |a-b| " + fmt(*t.max_abs_diff) : ", bytes differ")});
    }
  }
  if (d.tensors_same > 0) {
    std::string s = std::to_string(d.tensors_same) + " model tensors";
    if (d.deep) {
      s += " (" + std::to_string(d.tensors_by_value) + " equal by value";
      if (d.tensors_unread > 0)
        s += ", " + std::to_string(d.tensors_unread) + " by dtype and shape only: no bytes read";
      s += ")";
    }
    same.push_back(s);
  }
  for (const auto& [what, dg] :
       {std::pair<const char*, CheckpointDiff::Digest>{"config digest", d.config},
        {"environment digest", d.environment}}) {
    if (dg.a != dg.b) {
      rows.push_back({what, dg.a.value_or("-"), dg.b.value_or("-")});
    } else if (dg.a) {
      same.push_back(std::string(what) + " " + *dg.a);
    }
  }
  if (rows.empty()) {
    o << "no differences\n";
  } else {
    size_t w = 10, wa = 8;
    for (const auto& r : rows) {
      w = std::max(w, r[0].size() + 2);
      wa = std::max(wa, r[1].size() + 2);
    }
    o << d.differences << " difference(s)\n" << pad("WHAT", w) << pad("A", wa) << "B\n";
    for (const auto& r : rows) o << pad(r[0], w) << pad(r[1], wa) << r[2] << "\n";
  }
  if (!same.empty()) {
    o << "\nsame: ";
    for (size_t i = 0; i < same.size(); ++i) o << (i ? "; " : "") << same[i];
    o << "\n";
  }
  for (const auto& c : d.components) {
    if (!c.note.empty()) o << "note: " << c.note << "\n";
  }
  return o.str();
}

}  // namespace ckpt::verify
