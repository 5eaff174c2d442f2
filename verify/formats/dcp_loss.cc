// Loss accounting for torch.distributed.checkpoint folders (dcp_loss.h).
#include "verify/formats/dcp_loss.h"

#include <algorithm>
#include <cctype>
#include <optional>
#include <set>

#include "verify/formats/detect.h"

namespace ckpt::verify {
namespace {

constexpr size_t kMaxNamed = 256;  // entries named per finding; the rest are counted
constexpr int kMaxDepth = 64;

std::string key_text(const Value* k) {
  if (k->kind == Kind::kStr) return k->s;
  if (k->kind == Kind::kInt) return std::to_string(k->i);
  return summarize(*k);
}

// The paths detection gives the leaves in `want` ("optimizer.param_groups[0].lr"): dict keys
// joined by dots, list items as [i].
void find_paths(const Value* v, const std::string& path, int depth,
                const std::set<const Value*>& want, std::set<const Value*>* seen,
                std::map<const Value*, std::string>* out) {
  if (v == nullptr || depth > kMaxDepth || out->size() == want.size()) return;
  if (want.count(v) != 0) out->emplace(v, path);
  if (!seen->insert(v).second) return;
  if (v->kind == Kind::kDict) {
    for (const auto& [k, x] : v->entries) {
      const std::string key = key_text(k);
      find_paths(x, path.empty() ? key : path + "." + key, depth + 1, want, seen, out);
    }
  } else if (v->kind == Kind::kList || v->kind == Kind::kTuple) {
    for (size_t i = 0; i < v->items.size(); ++i)
      find_paths(v->items[i], path + "[" + std::to_string(i) + "]", depth + 1, want, seen, out);
  }
}

bool under(const std::string& path, const std::string& prefix) {
  if (prefix.empty() || path.compare(0, prefix.size(), prefix) != 0) return false;
  return path.size() == prefix.size() || path[prefix.size()] == '.' || path[prefix.size()] == '[';
}

bool holds_record(const std::map<std::string, TensorInfo>& tensors, const std::string& key) {
  for (const auto& [name, t] : tensors) {
    if (t.record == key) return true;
  }
  return false;
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

}  // namespace

// Optimizer words first: "optimizer.state.0.weight.step" is the optimizer's.
std::optional<AuditComponent> dcp_component_named(const std::string& path) {
  const std::string p = lower(path);
  auto has = [&p](const char* w) { return p.find(w) != std::string::npos; };
  if (has("optim") || has("param_groups") || p.rfind("state.", 0) == 0)
    return AuditComponent::kOptimizer;
  if (has("sched")) return AuditComponent::kScheduler;
  if (has("scaler")) return AuditComponent::kGradScaler;
  if (has("rng") || has("random") || has("generator") || has("seed"))
    return has("cuda") ? AuditComponent::kRngCuda : AuditComponent::kRngCpu;
  if (has("loader") || has("sampler")) return AuditComponent::kLoader;
  if (has("step") || has("epoch") || has("iter") || has("train_state") || has("token"))
    return AuditComponent::kCounters;
  // nn.Module.get_extra_state() (TransformerEngine's fp8 metadata in Megatron): the module's.
  if (has("model") || has("module") || has("_extra_state")) return AuditComponent::kModel;
  return std::nullopt;
}

namespace {

std::optional<AuditComponent> component_of(const DcpLostEntry& e, const std::string& path,
                                           const CheckpointView& v) {
  if (e.tensor) {
    for (const TensorInfo& t : v.model.tensors) {
      if (t.record == e.key) return AuditComponent::kModel;
    }
  }
  auto in_optimizer = [&](const OptimizerPart& o) {
    if (!o.found) return false;
    if (under(path, o.name)) return true;
    if (!e.tensor) return false;
    for (const auto& ps : o.state) {
      if (holds_record(ps.tensors, e.key)) return true;
    }
    return false;
  };
  if (in_optimizer(v.optimizer)) return AuditComponent::kOptimizer;
  for (const OptimizerPart& o : v.more_optimizers) {
    if (in_optimizer(o)) return AuditComponent::kOptimizer;
  }
  if (v.scheduler.found && under(path, v.scheduler.name)) return AuditComponent::kScheduler;
  for (const SchedulerPart& s : v.more_schedulers) {
    if (s.found && under(path, s.name)) return AuditComponent::kScheduler;
  }
  // the entry's bytes are gone: its key is all that is left
  return dcp_component_named(path);
}

// "model.0.weight" 12 of 24 elements [0:3, 0:4], ...
struct TensorLoss {
  std::vector<store::Extent> ranges;
  uint64_t lost = 0, total = 1;
  bool scalar = false;
};

std::string describe(const std::map<std::string, TensorLoss>& tensors,
                     const std::vector<std::string>& bytes) {
  std::string s;
  size_t named = 0;
  const size_t all = tensors.size() + bytes.size();
  for (const auto& [key, t] : tensors) {
    if (named++ == kMaxNamed) break;
    s += (s.empty() ? "" : "; ") + std::string("tensor \"") + key + "\" loses ";
    if (t.scalar) {  // a 0-d tensor: no range to name
      s += "its one element (0-d)";
      continue;
    }
    s += std::to_string(t.lost) + " of " + std::to_string(t.total) + " elements:";
    for (size_t i = 0; i < t.ranges.size(); ++i)
      s += (i == 0 ? " " : ", ") + store::extent_string(t.ranges[i]);
  }
  for (const std::string& key : bytes) {
    if (named++ >= kMaxNamed) break;
    s += (s.empty() ? "" : "; ") + std::string("bytes entry \"") + key + "\"";
  }
  if (all > kMaxNamed) s += "; and " + std::to_string(all - kMaxNamed) + " more entries";
  return s;
}

struct Group {
  std::map<std::string, TensorLoss> tensors;
  std::vector<std::string> bytes;
};

// The tensors of component `c` lost whole, over every file, and the files that held them.
std::set<std::string> lost_whole(const std::map<std::pair<std::string, int>, Group>& groups,
                                 AuditComponent c, std::set<std::string>* files) {
  std::map<std::string, std::pair<uint64_t, uint64_t>> n;  // key → (elements lost, total)
  for (const auto& [where, g] : groups) {
    if (where.second != static_cast<int>(c)) continue;
    for (const auto& [key, t] : g.tensors) {
      n[key].first += t.lost;
      n[key].second = t.total;
    }
    files->insert(where.first);
  }
  std::set<std::string> out;
  for (const auto& [key, lt] : n) {
    if (lt.first >= lt.second) out.insert(key);
  }
  return out;
}

std::string joined(const std::set<std::string>& names) {
  std::string s;
  for (const std::string& n : names) s += (s.empty() ? "" : ", ") + n;
  return s;
}

// A model (or the one optimizer) whose every tensor is lost whole has nothing left of it:
// `missing` ("nothing of it is left", docs/cli.md), not `inconsistent`.
void mark_missing(const std::map<std::pair<std::string, int>, Group>& groups,
                  CheckpointView* view) {
  std::set<std::string> files;
  ModelPart& m = view->model;
  const std::set<std::string> model = lost_whole(groups, AuditComponent::kModel, &files);
  bool all = m.found && !m.tensors.empty();
  for (const TensorInfo& t : m.tensors) all = all && model.count(t.record) != 0;
  if (all) {
    m.found = false;
    m.evidence = "every one of its " + std::to_string(m.tensors.size()) +
                 " tensors is lost with the files that held it (" + joined(files) + ")";
  }
  files.clear();
  OptimizerPart& o = view->optimizer;
  const std::set<std::string> opt = lost_whole(groups, AuditComponent::kOptimizer, &files);
  size_t tensors = 0;
  all = o.found && view->more_optimizers.empty();
  for (const auto& ps : o.state) {
    for (const auto& [n, t] : ps.tensors) {
      ++tensors;
      all = all && opt.count(t.record) != 0;
    }
  }
  if (all && tensors > 0) {
    o.found = false;
    o.evidence = "every one of its " + std::to_string(tensors) +
                 " state tensors is lost with the files that held it (" + joined(files) + ")";
  }
}

}  // namespace

void report_dcp_loss(const std::vector<DcpLostEntry>& lost, const DcpDamagedFiles& damaged,
                     const Value& root, CheckpointView* view) {
  if (lost.empty() && damaged.empty()) return;
  std::set<const Value*> want;
  for (const DcpLostEntry& e : lost) {
    if (e.leaf != nullptr) want.insert(e.leaf);
  }
  std::map<const Value*, std::string> paths;
  std::set<const Value*> seen;
  find_paths(&root, "", 0, want, &seen, &paths);

  // (file, component or none) → what it lost
  std::map<std::pair<std::string, int>, Group> groups;
  std::map<std::string, std::pair<size_t, size_t>> per_file;  // tensor chunks, bytes entries
  for (const DcpLostEntry& e : lost) {
    auto p = paths.find(e.leaf);
    const std::string path = p != paths.end() ? p->second : e.key;
    const auto c = component_of(e, path, *view);
    Group& g = groups[{e.file, c ? static_cast<int>(*c) : -1}];
    if (e.tensor) {
      TensorLoss& t = g.tensors[e.key];
      if (t.ranges.empty()) {
        for (int64_t d : e.shape) t.total *= static_cast<uint64_t>(std::max<int64_t>(d, 0));
        t.scalar = e.shape.empty();
      }
      t.ranges.push_back(e.range);
      t.lost += e.range.numel();
      ++per_file[e.file].first;
    } else {
      g.bytes.push_back(e.key);
      ++per_file[e.file].second;
    }
  }
  auto file_label = [&damaged](const std::string& file) {
    if (file.empty()) return std::string(".metadata (entries without a storage location)");
    auto d = damaged.find(file);
    return file + " (" + (d != damaged.end() ? d->second : "damaged") + ")";
  };
  for (const auto& [file, what] : damaged) {
    const auto counts = per_file[file];
    view->findings.push_back({Severity::kError, std::nullopt,
                              file + " is " + what + ": " + std::to_string(counts.first) +
                                  " tensor chunk(s) and " + std::to_string(counts.second) +
                                  " bytes entr" + (counts.second == 1 ? "y" : "ies") +
                                  " it held are lost",
                              false});
  }
  mark_missing(groups, view);
  for (auto& [where, g] : groups) {
    std::sort(g.bytes.begin(), g.bytes.end());
    for (auto& [key, t] : g.tensors) {
      std::sort(
          t.ranges.begin(), t.ranges.end(),
          [](const store::Extent& a, const store::Extent& b) { return a.offsets < b.offsets; });
    }
    const std::string text = describe(g.tensors, g.bytes);
    if (where.second < 0) {
      view->findings.push_back({Severity::kError, std::nullopt,
                                file_label(where.first) + " held entries of no component: " + text,
                                false});
      continue;
    }
    const auto c = static_cast<AuditComponent>(where.second);
    view->findings.push_back(
        {Severity::kError, c,
         file_label(where.first) + " held " + component_name(c) + " entries, now lost: " + text,
         true});
  }
}

}  // namespace ckpt::verify
