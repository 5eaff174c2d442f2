#include "ckpt/torch/optimizer_state.h"

#include <torch/nn/module.h>
#include <torch/optim/adagrad.h>
#include <torch/optim/adam.h>
#include <torch/optim/adamw.h>
#include <torch/optim/lbfgs.h>
#include <torch/optim/rmsprop.h>
#include <torch/optim/sgd.h>

#include <algorithm>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <typeinfo>
#include <unordered_map>
#include <utility>
#include <vector>

#include "ckpt/base/text.h"
#include "ckpt/io/host_memory.h"
#include "ckpt/torch/compat.h"
#include "ckpt/torch/in_place.h"
#include "ckpt/torch/tensor_convert.h"
namespace ckpt::torch_adapter {
namespace {

// An uninitialised tensor shaped, typed and placed as `param`, for a fresh optimizer's moment the
// restore is about to fill. On the CPU where prefer_host_memory says so: in memory whose 2 MiB-
// aligned part is advised to use huge pages, owned by the tensor (ckpt/io/host_memory.h:
// first-touch memory costs more than the restore's reads). Else, or where that memory cannot be
// had, at::empty. Throws as at::empty.
at::Tensor fresh_like(const at::Tensor& param) {
  const uint64_t nbytes = static_cast<uint64_t>(param.nbytes());
  if (!param.device().is_cpu() || !prefer_host_memory(nbytes)) {
    return at::empty(param.sizes(), param.options());
  }
  auto memory = HostMemory::allocate(nbytes, /*populate=*/false, "a restored tensor");
  if (!memory.is_ok()) return at::empty(param.sizes(), param.options());
  auto owned = std::make_unique<HostMemory>(std::move(memory).value());
  HostMemory* raw = owned.get();
  at::Tensor t = at::from_blob(
      raw->data(), param.sizes(), [raw](void*) { delete raw; }, param.options());
  owned.release();  // the tensor's storage owns it now
  return t;
}

namespace optim = torch::optim;

// ---- strict attribute reads: a missing or mistyped hyperparameter is an error, never a default.

Result<double> need_double(const Node& n, const std::string& key, const std::string& where) {
  const AttrValue* v = n.find_attr(key);
  if (v != nullptr) {
    if (auto p = std::get_if<double>(v)) return *p;
    if (auto p = std::get_if<int64_t>(v)) return static_cast<double>(*p);
  }
  return corrupt(where + ": attribute " + in_quotes(key) + " is missing or not a number");
}

Result<bool> need_bool(const Node& n, const std::string& key, const std::string& where) {
  const AttrValue* v = n.find_attr(key);
  if (v != nullptr) {
    if (auto p = std::get_if<bool>(v)) return *p;
  }
  return corrupt(where + ": attribute " + in_quotes(key) + " is missing or not a bool");
}

Result<int64_t> need_int(const Node& n, const std::string& key, const std::string& where) {
  const AttrValue* v = n.find_attr(key);
  if (v != nullptr) {
    if (auto p = std::get_if<int64_t>(v)) return *p;
  }
  return corrupt(where + ": attribute " + in_quotes(key) + " is missing or not an int64");
}

// ---- one hyperparameter value, both directions, by its C++ type

using Betas = std::tuple<double, double>;

AttrValue to_attr(double v) { return v; }
AttrValue to_attr(bool v) { return v; }
AttrValue to_attr(const Betas& b) { return std::vector<double>{std::get<0>(b), std::get<1>(b)}; }

Status read_attr(const Node& g, const char* key, const std::string& where, double* out) {
  CKPT_ASSIGN_OR_RETURN(*out, need_double(g, key, where));
  return Status::ok();
}

Status read_attr(const Node& g, const char* key, const std::string& where, bool* out) {
  CKPT_ASSIGN_OR_RETURN(*out, need_bool(g, key, where));
  return Status::ok();
}

Status read_attr(const Node& g, const char* key, const std::string& where, Betas* out) {
  std::vector<double> b = g.get_doubles(key);
  if (b.size() != 2) {
    return corrupt(where + ": attribute " + in_quotes(key) + " should be 2 doubles, got " +
                   std::to_string(b.size()));
  }
  *out = std::make_tuple(b[0], b[1]);
  return Status::ok();
}

// ---- the descriptor of one optimizer kind, each fact listed once (the table is kinds() below)

// A hyperparameter of options type O: the group attribute and libtorch's accessor share its
// name, and the one entry serves capture (get) and restore (set).
template <typename O>
struct HParam {
  const char* name;
  AttrValue (*get)(const O&);
  Status (*set)(const Node& g, const std::string& where, O* o);
};

// A per-parameter state tensor of state type S, and whether a group with options O needs it
// (nullptr: every state of the kind has it).
template <typename O, typename S>
struct StateTensor {
  const char* name;
  const at::Tensor& (*get)(const S&);
  void (*set)(S* s, at::Tensor t);
  bool (*needed)(const O&);
};

// The per-parameter "step" of state type S; both null for a kind that keeps none.
template <typename S>
struct StepField {
  int64_t (*get)(const S&) = nullptr;
  void (*set)(S* s, int64_t step) = nullptr;
};

// The table's entries are written once for every options and state type: generic accessors
// that become an HParam<O>, StateTensor<O, S> or StepField<S> where the table needs one.
template <typename Get, typename Set>
struct HParamEntry {
  const char* name;
  Get get;
  Set set;
  template <typename O>
  operator HParam<O>() const {
    return {name, get, set};
  }
};
template <typename Get, typename Set>
HParamEntry<Get, Set> hparam(const char* name, Get get, Set set) {
  return {name, get, set};
}
#define CKPT_HPARAM(field)                                      \
  hparam(                                                       \
      #field, [](const auto& o) { return to_attr(o.field()); }, \
      [](const Node& g, const std::string& where, auto* o) {    \
        return read_attr(g, #field, where, &o->field());        \
      })

template <typename Get, typename Set, typename Needed>
struct StateTensorEntry {
  const char* name;
  Get get;
  Set set;
  Needed needed;
  template <typename O, typename S>
  operator StateTensor<O, S>() const {
    return {name, get, set, needed};
  }
};
template <typename Get, typename Set, typename Needed>
StateTensorEntry<Get, Set, Needed> state_tensor(const char* name, Get get, Set set, Needed needed) {
  return {name, get, set, needed};
}
#define CKPT_STATE_TENSOR(field, needed)                                    \
  state_tensor(                                                             \
      #field, [](const auto& s) -> const at::Tensor& { return s.field(); }, \
      [](auto* s, at::Tensor t) { s->field(std::move(t)); }, needed)

struct StepEntry {
  template <typename S>
  operator StepField<S>() const {
    return {[](const S& s) { return s.step(); }, [](S* s, int64_t v) { s->step(v); }};
  }
};
constexpr StepEntry kStep;  // a kind with a per-parameter step; {} for one without

template <typename O, typename S>
struct Descriptor {
  const char* name;  // the /optimizer "type" attribute
  std::vector<HParam<O>> hparams;
  std::vector<StateTensor<O, S>> tensors;
  StepField<S> step;
};

// The tensors (and step) of one parameter's state object, by schema name.
struct StateParts {
  std::map<std::string, at::Tensor> tensors;
  std::optional<int64_t> step;
};

// What capture and restore ask of a kind; one implementation (KindOf) serves every descriptor.
class OptimizerKind {
 public:
  virtual ~OptimizerKind() = default;
  const char* name() const { return info_.name.c_str(); }
  const OptimizerKindInfo& info() const { return info_; }
  virtual bool is_exactly(const optim::Optimizer& opt) const = 0;  // this class, not a subclass
  virtual bool is_a(const optim::Optimizer& opt) const = 0;
  virtual void write_hparams(const optim::OptimizerOptions& o, Node* g) const = 0;
  // New options for a group, from its node.
  virtual Result<std::unique_ptr<optim::OptimizerOptions>> read_hparams(
      const Node& g, const std::string& where) const = 0;
  // nullopt: `s` is another kind's state.
  virtual std::optional<StateParts> split_state(const optim::OptimizerParamState& s) const = 0;
  // The state tensors a parameter of a group with these options has, in the table's order.
  virtual std::vector<std::string> required_tensors(const optim::OptimizerOptions& o) const = 0;
  virtual std::unique_ptr<optim::OptimizerParamState> build_state(
      std::map<std::string, at::Tensor> t, int64_t step) const = 0;

 protected:
  explicit OptimizerKind(OptimizerKindInfo info) : info_(std::move(info)) {}

 private:
  OptimizerKindInfo info_;
};

template <typename Optim, typename O, typename S>
class KindOf final : public OptimizerKind {
 public:
  explicit KindOf(Descriptor<O, S> d) : OptimizerKind(info_of(d)), d_(std::move(d)) {}

  bool is_exactly(const optim::Optimizer& opt) const override {
    return typeid(opt) == typeid(Optim);
  }
  bool is_a(const optim::Optimizer& opt) const override {
    return dynamic_cast<const Optim*>(&opt) != nullptr;
  }
  void write_hparams(const optim::OptimizerOptions& o, Node* g) const override {
    const auto& options = static_cast<const O&>(o);
    g->attrs.clear();
    for (const HParam<O>& h : d_.hparams) g->attrs[h.name] = h.get(options);
  }
  Result<std::unique_ptr<optim::OptimizerOptions>> read_hparams(
      const Node& g, const std::string& where) const override {
    auto o = std::make_unique<O>(/*lr=*/0.0);  // every field is set from the table
    for (const HParam<O>& h : d_.hparams) CKPT_RETURN_IF_ERROR(h.set(g, where, o.get()));
    return std::unique_ptr<optim::OptimizerOptions>(std::move(o));
  }
  std::optional<StateParts> split_state(const optim::OptimizerParamState& s) const override {
    auto state = dynamic_cast<const S*>(&s);
    if (state == nullptr) return std::nullopt;
    StateParts parts;
    for (const StateTensor<O, S>& t : d_.tensors) {
      const at::Tensor& x = t.get(*state);
      if (x.defined()) parts.tensors[t.name] = x;
    }
    if (d_.step.get != nullptr) parts.step = d_.step.get(*state);
    return parts;
  }
  std::vector<std::string> required_tensors(const optim::OptimizerOptions& o) const override {
    std::vector<std::string> names;
    for (const StateTensor<O, S>& t : d_.tensors) {
      if (t.needed == nullptr || t.needed(static_cast<const O&>(o))) names.push_back(t.name);
    }
    return names;
  }
  std::unique_ptr<optim::OptimizerParamState> build_state(std::map<std::string, at::Tensor> t,
                                                          int64_t step) const override {
    auto s = std::make_unique<S>();
    for (const StateTensor<O, S>& x : d_.tensors) {
      auto it = t.find(x.name);
      x.set(s.get(), it != t.end() ? it->second : at::Tensor());
    }
    if (d_.step.set != nullptr) d_.step.set(s.get(), step);
    return s;
  }

 private:
  static OptimizerKindInfo info_of(const Descriptor<O, S>& d) {
    OptimizerKindInfo info{d.name, {}, {}, d.step.get != nullptr};
    for (const HParam<O>& h : d.hparams) info.hyperparameters.push_back(h.name);
    for (const StateTensor<O, S>& t : d.tensors) info.state_tensors.push_back(t.name);
    return info;
  }

  Descriptor<O, S> d_;
};

// Adam and AdamW: the same hyperparameters and state in two unrelated libtorch classes.
template <typename Optim, typename O, typename S>
std::unique_ptr<const OptimizerKind> adam_like(const char* name) {
  return std::make_unique<KindOf<Optim, O, S>>(
      Descriptor<O, S>{name,
                       {CKPT_HPARAM(lr), CKPT_HPARAM(betas), CKPT_HPARAM(eps),
                        CKPT_HPARAM(weight_decay), CKPT_HPARAM(amsgrad)},
                       {CKPT_STATE_TENSOR(exp_avg, nullptr), CKPT_STATE_TENSOR(exp_avg_sq, nullptr),
                        CKPT_STATE_TENSOR(max_exp_avg_sq, [](const O& o) { return o.amsgrad(); })},
                       kStep});
}

using KindTable = std::vector<std::unique_ptr<const OptimizerKind>>;

// Every supported kind, in the order the schema (optimizer_state.h) lists them.
KindTable build_kinds() {
  KindTable t;
  t.push_back(adam_like<optim::Adam, optim::AdamOptions, optim::AdamParamState>("adam"));
  t.push_back(adam_like<optim::AdamW, optim::AdamWOptions, optim::AdamWParamState>("adamw"));
  using SGDKind = KindOf<optim::SGD, optim::SGDOptions, optim::SGDParamState>;
  t.push_back(std::make_unique<SGDKind>(Descriptor<optim::SGDOptions, optim::SGDParamState>{
      "sgd",
      {CKPT_HPARAM(lr), CKPT_HPARAM(momentum), CKPT_HPARAM(dampening), CKPT_HPARAM(weight_decay),
       CKPT_HPARAM(nesterov)},
      {CKPT_STATE_TENSOR(momentum_buffer, nullptr)},
      {}}));  // libtorch's SGD keeps no step
  using RMSpropKind = KindOf<optim::RMSprop, optim::RMSpropOptions, optim::RMSpropParamState>;
  t.push_back(
      std::make_unique<RMSpropKind>(Descriptor<optim::RMSpropOptions, optim::RMSpropParamState>{
          "rmsprop",
          {CKPT_HPARAM(lr), CKPT_HPARAM(alpha), CKPT_HPARAM(eps), CKPT_HPARAM(weight_decay),
           CKPT_HPARAM(momentum), CKPT_HPARAM(centered)},
          {CKPT_STATE_TENSOR(square_avg, nullptr),
           CKPT_STATE_TENSOR(momentum_buffer,
                             [](const optim::RMSpropOptions& o) { return o.momentum() > 0; }),
           CKPT_STATE_TENSOR(grad_avg,
                             [](const optim::RMSpropOptions& o) { return o.centered(); })},
          kStep}));
  using AdagradKind = KindOf<optim::Adagrad, optim::AdagradOptions, optim::AdagradParamState>;
  t.push_back(
      std::make_unique<AdagradKind>(Descriptor<optim::AdagradOptions, optim::AdagradParamState>{
          "adagrad",
          {CKPT_HPARAM(lr), CKPT_HPARAM(lr_decay), CKPT_HPARAM(weight_decay),
           CKPT_HPARAM(initial_accumulator_value), CKPT_HPARAM(eps)},
          {CKPT_STATE_TENSOR(sum, nullptr)},
          kStep}));
  return t;
}

const KindTable& kinds() {
  static const KindTable table = build_kinds();
  return table;
}

#undef CKPT_HPARAM
#undef CKPT_STATE_TENSOR

Result<const OptimizerKind*> detect(const optim::Optimizer& opt) {
  if (dynamic_cast<const optim::LBFGS*>(&opt) != nullptr) {
    return unsupported(
        "optimizer LBFGS is not supported: its state (direction history, closure evaluations) "
        "has no per-parameter form ckpt can restore exactly");
  }
  // The exact class first: were AdamW ever to derive from Adam, it must not be recorded as Adam.
  for (const auto& k : kinds()) {
    if (k->is_exactly(opt)) return k.get();
  }
  for (const auto& k : kinds()) {
    if (k->is_a(opt)) return k.get();
  }
  std::string supported;
  for (const auto& k : kinds()) supported += (supported.empty() ? "" : ", ") + k->info().name;
  return unsupported(std::string("optimizer type ") + typeid(opt).name() + " is not supported (" +
                     supported + " are)");
}

Result<StateParts> split_state(const OptimizerKind& k, const optim::OptimizerParamState& s) {
  std::optional<StateParts> parts = k.split_state(s);
  if (parts) return std::move(*parts);
  return internal_error(std::string("optimizer ") + k.name() +
                        " holds a per-parameter state of another optimizer type");
}

// Names of the optimizer's parameters, in group order, through the module's parameter names.
Result<std::vector<std::vector<std::string>>> name_params(const optim::Optimizer& opt,
                                                          const torch::nn::Module& m) {
  std::unordered_map<const c10::TensorImpl*, std::string> names;
  for (const auto& item : m.named_parameters(/*recurse=*/true)) {
    if (item.value().defined()) names.emplace(item.value().unsafeGetTensorImpl(), item.key());
  }
  std::vector<std::vector<std::string>> groups;
  size_t index = 0;
  for (size_t g = 0; g < opt.param_groups().size(); ++g) {
    std::vector<std::string>& out = groups.emplace_back();
    for (const at::Tensor& p : opt.param_groups()[g].params()) {
      auto it = names.find(p.unsafeGetTensorImpl());
      if (it == names.end()) {
        return invalid_argument("optimizer parameter #" + std::to_string(index) + " (group " +
                                std::to_string(g) + ") is not a parameter of the module");
      }
      out.push_back(it->second);
      ++index;
    }
  }
  return groups;
}

}  // namespace

std::vector<OptimizerKindInfo> optimizer_kinds() {
  std::vector<OptimizerKindInfo> out;
  for (const auto& k : kinds()) out.push_back(k->info());
  return out;
}

Result<std::string> optimizer_type(const optim::Optimizer& opt) {
  CKPT_ASSIGN_OR_RETURN(const OptimizerKind* k, detect(opt));
  return std::string(k->name());
}

Status capture_optimizer(const optim::Optimizer& opt, const torch::nn::Module& m, Node* out) {
  CKPT_ASSIGN_OR_RETURN(const OptimizerKind* k, detect(opt));
  CKPT_ASSIGN_OR_RETURN(auto group_names, name_params(opt, m));
  Node node;
  std::vector<std::string> all_names;
  Node& groups = node.child("groups");
  Node& states = node.child("state");
  const auto& state_map = opt.state();
  for (size_t g = 0; g < group_names.size(); ++g) {
    const optim::OptimizerParamGroup& group = opt.param_groups()[g];
    Node& gn = groups.child(std::to_string(g));
    k->write_hparams(group.options(), &gn);
    gn.attrs["params"] = group_names[g];
    for (size_t i = 0; i < group.params().size(); ++i) {
      const std::string& name = group_names[g][i];
      all_names.push_back(name);
      auto it = state_map.find(compat::state_key(group.params()[i]));
      if (it == state_map.end() || states.find_child(name) != nullptr) continue;
      CKPT_ASSIGN_OR_RETURN(StateParts parts, split_state(*k, *it->second));
      Node& sn = states.child(name);
      for (const auto& [tname, t] : parts.tensors) {
        Result<Tensor> ct = to_ckpt_tensor(t);
        if (!ct.is_ok()) {
          return ct.status().with_context("optimizer state " + in_quotes(tname) + " of " +
                                          in_quotes(name));
        }
        sn.tensors[tname] = std::move(ct).value();
      }
      if (parts.step) sn.attrs["step"] = *parts.step;
    }
  }
  node.attrs["type"] = std::string(k->name());
  node.attrs["param_names"] = std::move(all_names);
  *out = std::move(node);
  return Status::ok();
}

struct PreparedOptimizer::Impl {
  std::vector<TensorTarget> targets;
  std::vector<std::unique_ptr<optim::OptimizerOptions>> options;  // per group
  std::map<std::string, at::Tensor> params;                       // by name
  std::map<std::string, std::unique_ptr<optim::OptimizerParamState>> state;
};

PreparedOptimizer::PreparedOptimizer() : impl_(std::make_unique<Impl>()) {}
PreparedOptimizer::~PreparedOptimizer() = default;
PreparedOptimizer::PreparedOptimizer(PreparedOptimizer&&) noexcept = default;
PreparedOptimizer& PreparedOptimizer::operator=(PreparedOptimizer&&) noexcept = default;
const std::vector<TensorTarget>& PreparedOptimizer::targets() const { return impl_->targets; }

// 3. Commit: nothing before this touched the optimizer.
void PreparedOptimizer::commit(optim::Optimizer& opt) {
  for (size_t g = 0; g < impl_->options.size(); ++g) {
    opt.param_groups()[g].set_options(std::move(impl_->options[g]));
  }
  auto& state_map = opt.state();
  for (const auto& [name, p] : impl_->params) state_map.erase(compat::state_key(p));
  for (auto& [name, s] : impl_->state) {
    state_map[compat::state_key(impl_->params[name])] = std::move(s);
  }
  impl_->options.clear();
  impl_->state.clear();
}

namespace {

// The optimizer's current state tensor `tname` of `param` when the restore can fill it in place.
at::Tensor reusable(const OptimizerKind& k, const optim::Optimizer& opt, const at::Tensor& param,
                    const std::string& tname) {
  auto it = opt.state().find(compat::state_key(param));
  if (it == opt.state().end()) return {};
  std::optional<StateParts> parts = k.split_state(*it->second);
  if (!parts) return {};
  auto t = parts->tensors.find(tname);
  if (t == parts->tensors.end()) return {};
  const at::Tensor& x = t->second;
  const bool fits = x.defined() && x.scalar_type() == param.scalar_type() &&
                    x.sizes() == param.sizes() && x.device() == param.device() &&
                    x.is_contiguous() && x.storage_offset() == 0 && !x.is_alias_of(param);
  return fits ? x : at::Tensor();
}

}  // namespace

Result<PreparedOptimizer> prepare_optimizer(const Node& in, optim::Optimizer& opt,
                                            const torch::nn::Module& m) {
  CKPT_ASSIGN_OR_RETURN(const OptimizerKind* k, detect(opt));
  const std::string saved_type = in.get_string("type");
  if (saved_type != k->name()) {
    return mismatch(std::string("optimizer type mismatch (expected ") + k->name() + ", got " +
                    in_quotes(saved_type) + ")");
  }
  CKPT_ASSIGN_OR_RETURN(auto group_names, name_params(opt, m));
  PreparedOptimizer prepared;
  PreparedOptimizer::Impl& out = *prepared.impl_;

  // 1. Structure: the same parameters, in the same groups, in the same order.
  const Node* groups = in.find_child("groups");
  if (groups == nullptr) return corrupt("optimizer: child \"groups\" is missing");
  if (groups->children.size() != group_names.size()) {
    return mismatch("optimizer has " + std::to_string(group_names.size()) +
                    " param groups, checkpoint has " + std::to_string(groups->children.size()));
  }
  std::map<std::string, size_t> group_of;
  for (size_t g = 0; g < group_names.size(); ++g) {
    const std::string where = "optimizer group " + std::to_string(g);
    const Node* gn = groups->find_child(std::to_string(g));
    if (gn == nullptr) return corrupt(where + " is missing from the checkpoint");
    const std::vector<std::string> saved = gn->get_strings("params");
    const std::vector<std::string>& here = group_names[g];
    for (size_t i = 0; i < std::max(saved.size(), here.size()); ++i) {
      const std::string a = i < here.size() ? in_quotes(here[i]) : "nothing";
      const std::string b = i < saved.size() ? in_quotes(saved[i]) : "nothing";
      if (a != b) {
        return mismatch(where + ", parameter #" + std::to_string(i) + ": expected " + a + ", got " +
                        b);
      }
      out.params[here[i]] = opt.param_groups()[g].params()[i];
      group_of[here[i]] = g;
    }
    CKPT_ASSIGN_OR_RETURN(auto options, k->read_hparams(*gn, where));
    out.options.push_back(std::move(options));
  }

  // 2. State: each saved entry belongs to a parameter and has exactly the tensors its group's
  // options need, each shaped and typed like the parameter; each gets a target to be filled.
  if (const Node* states = in.find_child("state")) {
    for (const auto& [name, sn] : states->children) {
      auto p = out.params.find(name);
      if (p == out.params.end()) {
        return mismatch("optimizer state for " + in_quotes(name) +
                        " in the checkpoint, but the optimizer has no such parameter");
      }
      const optim::OptimizerOptions& opts = *out.options[group_of[name]];
      std::vector<std::string> need = k->required_tensors(opts);
      std::map<std::string, at::Tensor> tensors;
      for (const std::string& tname : need) {
        const std::string path = "optimizer/state/" + name + "/" + tname;
        const Tensor* t = sn.find_tensor(tname);
        if (t == nullptr) return not_found("tensor " + in_quotes(path) + " is missing");
        CKPT_RETURN_IF_ERROR(check_dtype_shape(*t, p->second, path));
        at::Tensor target = reusable(*k, opt, p->second, tname);
        const bool fresh = !target.defined();
        try {
          if (fresh) target = fresh_like(p->second);
        } catch (const c10::Error& e) {
          return internal_error("tensor " + in_quotes(path) + ": cannot allocate on " +
                                p->second.device().str() + ": " + e.what_without_backtrace());
        }
        tensors[tname] = target;
        out.targets.push_back({"/" + path, target, fresh});
      }
      for (const auto& [tname, t] : sn.tensors) {
        if (std::find(need.begin(), need.end(), tname) == need.end()) {
          return mismatch("tensor " + in_quotes("optimizer/state/" + name + "/" + tname) +
                          " is not used by " + k->name() + " with this group's options");
        }
      }
      int64_t step = 0;
      if (k->info().has_step) {
        CKPT_ASSIGN_OR_RETURN(step, need_int(sn, "step", "optimizer state of " + in_quotes(name)));
      }
      out.state[name] = k->build_state(std::move(tensors), step);
    }
  }
  return prepared;
}

Status restore_optimizer(const Node& in, optim::Optimizer& opt, const torch::nn::Module& m) {
  CKPT_ASSIGN_OR_RETURN(PreparedOptimizer prepared, prepare_optimizer(in, opt, m));
  // Targets that are the optimizer's live tensors are written only once every source checks out.
  std::vector<std::pair<const Tensor*, const TensorTarget*>> copies;
  for (const TensorTarget& t : prepared.targets()) {
    const std::string path = t.path.substr(1);
    const Node* sn = in.find_child("state");
    const std::string rest = path.substr(std::string("optimizer/state/").size());
    const size_t slash = rest.rfind('/');
    const Node* pn = sn == nullptr ? nullptr : sn->find_child(rest.substr(0, slash));
    const Tensor* src = pn == nullptr ? nullptr : pn->find_tensor(rest.substr(slash + 1));
    if (src == nullptr) return internal_error("tensor " + in_quotes(path) + " vanished");
    CKPT_RETURN_IF_ERROR(check_compatible(*src, t.tensor, path));
    copies.emplace_back(src, &t);
  }
  for (auto& [src, t] : copies) {
    at::Tensor dst = t->tensor;
    CKPT_RETURN_IF_ERROR(copy_into(*src, dst, t->path.substr(1)));
  }
  prepared.commit(opt);
  return Status::ok();
}

}  // namespace ckpt::torch_adapter
