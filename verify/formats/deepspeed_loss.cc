// Loss accounting for DeepSpeed tag folders (deepspeed_loss.h).
#include "verify/formats/deepspeed_loss.h"

#include <algorithm>
#include <optional>
#include <set>

namespace ckpt::verify {
namespace {

constexpr size_t kMaxNamed = 64;  // parameters named per finding; the rest are counted

bool starts_with(const std::string& s, const std::string& p) { return s.rfind(p, 0) == 0; }

// [bf16_]zero_pp_rank_R_mp_rank_MM_{optim,model}_states.pt and mp_rank_MM_model_states.pt.
struct RankFile {
  bool optim = false;
  bool bf16 = false;
  int64_t dp = -1;  // -1: no data-parallel rank in the name (mp_rank_MM_model_states.pt)
  int64_t mp = -1;
};

std::optional<int64_t> number_at(const std::string& s, size_t* pos) {
  size_t end = *pos;
  while (end < s.size() && end - *pos < 9 && s[end] >= '0' && s[end] <= '9') ++end;
  if (end == *pos) return std::nullopt;
  const int64_t n = std::stoll(s.substr(*pos, end - *pos));
  *pos = end;
  return n;
}

std::optional<RankFile> parse_name(const std::string& n) {
  RankFile f;
  std::string rest = n;
  if (starts_with(rest, "bf16_")) {
    f.bf16 = true;
    rest = rest.substr(5);
  }
  size_t pos = 0;
  if (starts_with(rest, "zero_pp_rank_")) {
    pos = 13;
    auto r = number_at(rest, &pos);
    if (!r || rest.compare(pos, 1, "_") != 0) return std::nullopt;
    f.dp = *r;
    ++pos;
  }
  if (rest.compare(pos, 8, "mp_rank_") != 0) return std::nullopt;
  pos += 8;
  auto m = number_at(rest, &pos);
  if (!m) return std::nullopt;
  f.mp = *m;
  const std::string tail = rest.substr(pos);
  if (tail == "_optim_states.pt" && f.dp >= 0) {
    f.optim = true;
  } else if (tail != "_model_states.pt" || f.bf16) {
    return std::nullopt;
  }
  return f;
}

std::string two_digits(int64_t m) { return (m < 10 ? "0" : "") + std::to_string(m); }

std::string optim_name(bool bf16, int64_t dp, int64_t mp) {
  return std::string(bf16 ? "bf16_" : "") + "zero_pp_rank_" + std::to_string(dp) + "_mp_rank_" +
         two_digits(mp) + "_optim_states.pt";
}

std::string model_name(int64_t dp, int64_t mp) {
  return (dp >= 0 ? "zero_pp_rank_" + std::to_string(dp) + "_" : std::string()) + "mp_rank_" +
         two_digits(mp) + "_model_states.pt";
}

int64_t int_at(const Value* v, int64_t dflt) {
  if (v == nullptr) return dflt;
  auto i = v->as_int();
  return i ? *i : dflt;
}

const Value* path(const Value* v, std::initializer_list<const char*> keys) {
  for (const char* k : keys) {
    if (v == nullptr) return nullptr;
    v = v->get(k);
  }
  return v;
}

// A shape from param_shapes: a tuple of ints, or torch.Size((...)) when pickled as an object.
std::optional<int64_t> numel_of(const Value* v) {
  if (v != nullptr && v->kind == Kind::kObject && v->args != nullptr && !v->args->items.empty())
    v = v->args->items[0];
  if (v == nullptr || (v->kind != Kind::kTuple && v->kind != Kind::kList)) return std::nullopt;
  int64_t n = 1;
  for (const Value* d : v->items) {
    auto x = d->as_int();
    if (!x || *x < 0 || (*x > 0 && n > (int64_t{1} << 50) / *x)) return std::nullopt;
    n *= *x;
  }
  return n;
}

struct Param {
  std::string name;
  int64_t numel = 0;
};

// param_shapes: a list of {name: shape} per param group (or one dict in old versions).
std::vector<std::vector<Param>> param_groups_of(const Value* model_root) {
  std::vector<std::vector<Param>> out;
  const Value* ps = model_root != nullptr ? model_root->get("param_shapes") : nullptr;
  if (ps == nullptr) return out;
  std::vector<const Value*> groups;
  if (ps->kind == Kind::kDict) groups.push_back(ps);
  if (ps->kind == Kind::kList || ps->kind == Kind::kTuple) groups = ps->items;
  for (const Value* g : groups) {
    std::vector<Param> params;
    if (g->kind == Kind::kDict) {
      for (const auto& [k, s] : g->entries) {
        auto n = numel_of(s);
        if (k->kind == Kind::kStr && n) params.push_back({k->s, *n});
      }
    }
    out.push_back(std::move(params));
  }
  return out;
}

// What DeepSpeed says about the run: from a model-states file.
struct Layout {
  int64_t dp = 1, mp = 1, stage = -1;
  bool bf16 = false;
  std::vector<std::vector<Param>> groups;
};

Layout layout_of(const Value* root) {
  Layout l;
  l.dp = std::max<int64_t>(1, int_at(root->get("dp_world_size"), 1));
  l.mp = std::max<int64_t>(1, int_at(root->get("mp_world_size"), 1));
  const Value* cfg = root->get("ds_config");
  l.stage = int_at(path(cfg, {"zero_optimization", "stage"}), -1);
  const Value* bf = path(cfg, {"bf16", "enabled"});
  if (bf == nullptr) bf = path(cfg, {"bfloat16", "enabled"});
  l.bf16 = bf != nullptr && bf->kind == Kind::kBool && bf->b;
  l.groups = param_groups_of(root);
  return l;
}

// One parameter's flat elements [lo, hi) of `numel` that a rank held.
struct Held {
  std::string name;
  int64_t lo = 0, hi = 0, numel = 0;
};

// ZeRO 1/2: rank `r` holds flat elements [r*P, (r+1)*P) of each group (zero_to_fp32.py's
// _zero2_merge_trainable_params). `part` gives P per group (-1: computed from the shapes);
// `pads` the param_alignment_paddings (empty: none).
std::vector<Held> zero12_held(const Layout& l, int64_t r, const std::vector<int64_t>& part,
                              const std::vector<std::vector<int64_t>>& pads) {
  std::vector<Held> out;
  for (size_t g = 0; g < l.groups.size(); ++g) {
    int64_t total = 0;
    for (size_t i = 0; i < l.groups[g].size(); ++i) {
      total += l.groups[g][i].numel;
      if (g < pads.size() && i < pads[g].size()) total += pads[g][i];
    }
    const int64_t align = 2 * l.dp;
    int64_t p = g < part.size() ? part[g] : -1;
    if (p <= 0) p = (total + align - 1) / align * align / l.dp;
    const int64_t lo = r * p, hi = (r + 1) * p;
    int64_t off = 0;
    for (size_t i = 0; i < l.groups[g].size(); ++i) {
      const Param& q = l.groups[g][i];
      const int64_t a = std::max(lo, off), b = std::min(hi, off + q.numel);
      if (a < b) out.push_back({q.name, a - off, b - off, q.numel});
      off += q.numel + (g < pads.size() && i < pads[g].size() ? pads[g][i] : 0);
    }
  }
  return out;
}

// ZeRO 3: every parameter cut on its own (zero3_partitioned_param_info).
std::vector<Held> zero3_held(const Layout& l, int64_t r) {
  std::vector<Held> out;
  for (const auto& g : l.groups) {
    for (const Param& q : g) {
      const int64_t c = (q.numel + l.dp - 1) / l.dp;
      const int64_t a = std::min(q.numel, r * c), b = std::min(q.numel, (r + 1) * c);
      if (a < b) out.push_back({q.name, a, b, q.numel});
    }
  }
  return out;
}

std::string describe(const std::vector<Held>& held) {
  std::string s;
  int64_t lost = 0, total = 0;
  for (size_t i = 0; i < held.size(); ++i) {
    const Held& h = held[i];
    lost += h.hi - h.lo;
    total += h.numel;
    if (i == kMaxNamed) s += "; and " + std::to_string(held.size() - kMaxNamed) + " more";
    if (i >= kMaxNamed) continue;
    s += (i == 0 ? "" : "; ") + std::string("\"") + h.name + "\" elements [" +
         std::to_string(h.lo) + ":" + std::to_string(h.hi) + "] of " + std::to_string(h.numel) +
         (h.hi - h.lo == h.numel ? " (all)" : "");
  }
  return std::to_string(held.size()) + " parameter(s), " + std::to_string(lost) + " of their " +
         std::to_string(total) + " elements: " + s;
}

std::string keys_of(const Value* d, const std::string& prefix) {
  std::string s;
  if (d == nullptr || d->kind != Kind::kDict) return s;
  for (const auto& [k, v] : d->entries) {
    if (k->kind == Kind::kStr) s += (s.empty() ? "" : ", ") + prefix + k->s;
  }
  return s;
}

// What a surviving optimizer file of the same tensor-parallel rank says about every rank's
// partition: P per group, the alignment paddings, the per-group state keys and the entry keys.
struct Sibling {
  std::string name;
  std::vector<int64_t> part;
  std::vector<std::vector<int64_t>> pads;
  std::string state_keys;  // "exp_avg, exp_avg_sq, step"
  std::string entries;     // "optimizer_state_dict.loss_scaler, ..."
};

Sibling sibling_of(const std::string& name, const Value* root) {
  Sibling s;
  s.name = name;
  const Value* osd = root->get("optimizer_state_dict");
  if (osd == nullptr) return s;
  const Value* parts = osd->get("single_partition_of_fp32_groups");
  const Value* paddings = osd->get("group_paddings");
  if (parts != nullptr) {
    for (size_t g = 0; g < parts->items.size(); ++g) {
      const Value* t = parts->items[g];
      int64_t n = t->kind == Kind::kTensor ? t->tensor->numel() : -1;
      if (n >= 0 && paddings != nullptr && g < paddings->items.size())
        n += int_at(paddings->items[g], 0);
      s.part.push_back(n);
    }
  }
  if (const Value* ap = osd->get("param_alignment_paddings")) {
    for (const Value* g : ap->items) {
      std::vector<int64_t> row;
      for (const Value* x : g->items) row.push_back(int_at(x, 0));
      s.pads.push_back(std::move(row));
    }
  }
  const Value* base = osd->get("base_optimizer_state");
  if (base == nullptr) base = osd->get("optimizer_state_dict");  // ZeRO 3
  const Value* st = base != nullptr ? base->get("state") : nullptr;
  if (st != nullptr && !st->entries.empty()) s.state_keys = keys_of(st->entries[0].second, "");
  s.entries = keys_of(osd, "optimizer_state_dict.");
  return s;
}

class LossReport {
 public:
  LossReport(const std::map<std::string, const Value*>& read,
             const std::map<std::string, std::string>& damaged, CheckpointView* view)
      : read_(read), lost_(damaged), view_(*view) {}

  void run() {
    for (const auto& [name, root] : read_) {
      auto f = parse_name(name);
      if (f && !f->optim && model_root_ == nullptr) {
        model_root_ = root;
        model_file_ = name;
      }
    }
    if (model_root_ != nullptr) {
      layout_ = layout_of(model_root_);
      note_missing();
    } else {
      note_missing_model_states();
    }
    for (const auto& [name, why] : lost_) {
      auto f = parse_name(name);
      if (!f) {
        view_.findings.push_back({Severity::kError, std::nullopt,
                                  name + " is " + why + ": whatever it held is lost", false});
      } else if (f->optim) {
        optim_lost(name, *f, why);
      } else {
        model_lost(name, *f, why);
      }
    }
  }

 private:
  // The files the model states say were written and that are neither read nor damaged.
  void note_missing() {
    std::set<std::string> present;
    for (const auto& [name, root] : read_) present.insert(name);
    for (const auto& [name, why] : lost_) present.insert(name);
    auto f = parse_name(model_file_);
    int64_t stage = layout_.stage;
    if (stage < 0) stage = f && f->dp >= 0 ? 3 : 0;
    layout_.stage = stage;
    bool bf16 = layout_.bf16;
    for (const auto& n : present) {
      auto g = parse_name(n);
      bf16 = bf16 || (g && g->bf16);
    }
    for (int64_t m = 0; m < layout_.mp; ++m) {
      if (stage >= 3) {
        for (int64_t r = 0; r < layout_.dp; ++r) expect(model_name(r, m), present);
      } else {
        expect(model_name(-1, m), present);
      }
      if (stage >= 1 || bf16) {
        for (int64_t r = 0; r < layout_.dp; ++r) expect(optim_name(bf16, r, m), present);
      }
    }
  }
  // No model states read: the optimizer files say which there were (ZeRO 3 writes one per
  // data-parallel rank, ZeRO 1/2 one per tensor-parallel rank).
  void note_missing_model_states() {
    std::set<std::string> present;
    std::set<int64_t> dps, mps;
    bool z3 = false;
    auto add = [&](const std::string& name, const Value* root) {
      present.insert(name);
      auto f = parse_name(name);
      if (!f || !f->optim) return;
      dps.insert(f->dp);
      mps.insert(f->mp);
      const Value* osd = root != nullptr ? root->get("optimizer_state_dict") : nullptr;
      z3 = z3 || (osd != nullptr && osd->get("fp32_flat_groups") != nullptr);
    };
    for (const auto& [name, root] : read_) add(name, root);
    for (const auto& [name, why] : lost_) add(name, nullptr);
    for (int64_t m : mps) {
      if (!z3) expect(model_name(-1, m), present);
      for (int64_t r : dps) {
        if (z3) expect(model_name(r, m), present);
      }
    }
  }

  void expect(const std::string& name, const std::set<std::string>& present) {
    if (present.count(name) == 0) lost_[name] = "missing";
  }

  std::string where(const RankFile& f) const {
    return "rank " + std::to_string(f.dp) + " of dp_world_size " + std::to_string(layout_.dp) +
           (layout_.mp > 1 ? ", tensor-parallel rank " + std::to_string(f.mp) : "") +
           (layout_.stage >= 0 ? ", ZeRO stage " + std::to_string(layout_.stage) : "");
  }

  void optim_lost(const std::string& name, const RankFile& f, const std::string& why) {
    const std::string head = name + " is " + why;
    if (model_root_ == nullptr) {
      view_.findings.push_back({Severity::kError, AuditComponent::kOptimizer,
                                head + ": it held data-parallel rank " + std::to_string(f.dp) +
                                    "'s partition of the optimizer (no model-states file was "
                                    "read to place it)",
                                true});
      return;
    }
    std::optional<Sibling> sib;
    for (const auto& [n, root] : read_) {
      auto g = parse_name(n);
      if (g && g->optim && g->mp == f.mp) {
        sib = sibling_of(n, root);
        break;
      }
    }
    const bool z3 = layout_.stage >= 3;
    const std::vector<Held> held =
        z3 ? zero3_held(layout_, f.dp)
           : zero12_held(layout_, f.dp, sib ? sib->part : std::vector<int64_t>{},
                         sib ? sib->pads : std::vector<std::vector<int64_t>>{});
    const std::string state =
        sib && !sib->state_keys.empty() ? sib->state_keys : "the optimizer's moments";
    std::string msg = head + " (" + where(f) + "): it held that rank's partition — the fp32 " +
                      "master weights and " + state + " of " + describe(held);
    if (sib && !sib->entries.empty())
      msg += "; and its entries by key: " + sib->entries + " (as " + sib->name + " holds them)";
    msg += "; DeepSpeed's load_checkpoint on that rank stops without it";
    view_.findings.push_back({Severity::kError, AuditComponent::kOptimizer, msg, true});
    if (z3) {
      view_.findings.push_back(
          {Severity::kError, AuditComponent::kModel,
           head +
               ": under ZeRO 3 the module holds 0-element placeholders, and these weights "
               "were only in that partition: " +
               describe(held),
           true});
    }
  }

  void model_lost(const std::string& name, const RankFile& f, const std::string& why) {
    const std::string head = name + " is " + why;
    if (model_root_ == nullptr) {
      view_.findings.push_back(
          {Severity::kError, AuditComponent::kModel,
           head + ": no model-states file could be read; DeepSpeed keeps the module, "
                  "lr_scheduler, global_steps, global_samples, param_shapes and ds_config there",
           true});
      // DeepSpeed's schedulers write no initial_lr into the groups: say where it went, so the
      // scheduler is missing rather than "never attached".
      if (!view_.scheduler.found && view_.scheduler.evidence.empty())
        view_.scheduler.evidence = "lr_scheduler was in " + name + ", which is " + why;
      return;
    }
    const std::string held = keys_of(model_root_, "");
    if (f.dp >= 0) {
      // ZeRO 3: each rank's copy of the same entries, read by that rank alone.
      view_.findings.push_back(
          {Severity::kError, std::nullopt,
           head + " (" + where(f) + "): that rank's load_checkpoint opens it and stops; it held " +
               "that rank's copy of " + held + " (the values survive in " + model_file_ + ")",
           false});
      return;
    }
    view_.findings.push_back({Severity::kError, AuditComponent::kModel,
                              head + ": it held tensor-parallel rank " + std::to_string(f.mp) +
                                  "'s module (its share of every split weight) and its copy of " +
                                  held,
                              true});
  }

  const std::map<std::string, const Value*>& read_;
  std::map<std::string, std::string> lost_;
  CheckpointView& view_;
  const Value* model_root_ = nullptr;
  std::string model_file_;
  Layout layout_;
};

}  // namespace

bool is_deepspeed_model_states(const std::string& name) {
  auto f = parse_name(name);
  return f && !f->optim;
}

bool is_deepspeed_optim_states(const std::string& name) {
  auto f = parse_name(name);
  return f && f->optim;
}

void report_deepspeed_loss(const std::map<std::string, const Value*>& read,
                           const std::map<std::string, std::string>& damaged,
                           CheckpointView* view) {
  LossReport(read, damaged, view).run();
}

}  // namespace ckpt::verify
