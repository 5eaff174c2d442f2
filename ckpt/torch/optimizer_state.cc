#include "ckpt/torch/optimizer_state.h"

#include <torch/nn/module.h>
#include <torch/optim/adagrad.h>
#include <torch/optim/adam.h>
#include <torch/optim/adamw.h>
#include <torch/optim/lbfgs.h>
#include <torch/optim/rmsprop.h>
#include <torch/optim/sgd.h>

#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include "ckpt/torch/compat.h"
#include "ckpt/torch/in_place.h"
#include "ckpt/torch/tensor_convert.h"

namespace ckpt::torch_adapter {
namespace {

namespace optim = torch::optim;

enum class Kind { kAdam, kAdamW, kSGD, kRMSprop, kAdagrad };

const char* kind_name(Kind k) {
  switch (k) {
    case Kind::kAdam:
      return "adam";
    case Kind::kAdamW:
      return "adamw";
    case Kind::kSGD:
      return "sgd";
    case Kind::kRMSprop:
      return "rmsprop";
    case Kind::kAdagrad:
      return "adagrad";
  }
  return "?";
}

Result<Kind> detect(const optim::Optimizer& opt) {
  if (dynamic_cast<const optim::LBFGS*>(&opt) != nullptr) {
    return unsupported(
        "optimizer LBFGS is not supported: its state (direction history, closure evaluations) "
        "has no per-parameter form ckpt can restore exactly");
  }
  // AdamW first: were it ever to derive from Adam, it must not be recorded as Adam.
  if (dynamic_cast<const optim::AdamW*>(&opt) != nullptr) return Kind::kAdamW;
  if (dynamic_cast<const optim::Adam*>(&opt) != nullptr) return Kind::kAdam;
  if (dynamic_cast<const optim::SGD*>(&opt) != nullptr) return Kind::kSGD;
  if (dynamic_cast<const optim::RMSprop*>(&opt) != nullptr) return Kind::kRMSprop;
  if (dynamic_cast<const optim::Adagrad*>(&opt) != nullptr) return Kind::kAdagrad;
  return unsupported(std::string("optimizer type ") + typeid(opt).name() +
                     " is not supported (adam, adamw, sgd, rmsprop, adagrad are)");
}

std::string in_quotes(const std::string& s) { return "\"" + s + "\""; }

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

// ---- hyperparameters

void write_hparams(Kind k, const optim::OptimizerOptions& o, Node* g) {
  auto betas = [](const std::tuple<double, double>& b) {
    return std::vector<double>{std::get<0>(b), std::get<1>(b)};
  };
  switch (k) {
    case Kind::kAdam: {
      const auto& a = static_cast<const optim::AdamOptions&>(o);
      g->attrs = {{"lr", a.lr()},
                  {"betas", betas(a.betas())},
                  {"eps", a.eps()},
                  {"weight_decay", a.weight_decay()},
                  {"amsgrad", a.amsgrad()}};
      break;
    }
    case Kind::kAdamW: {
      const auto& a = static_cast<const optim::AdamWOptions&>(o);
      g->attrs = {{"lr", a.lr()},
                  {"betas", betas(a.betas())},
                  {"eps", a.eps()},
                  {"weight_decay", a.weight_decay()},
                  {"amsgrad", a.amsgrad()}};
      break;
    }
    case Kind::kSGD: {
      const auto& s = static_cast<const optim::SGDOptions&>(o);
      g->attrs = {{"lr", s.lr()},
                  {"momentum", s.momentum()},
                  {"dampening", s.dampening()},
                  {"weight_decay", s.weight_decay()},
                  {"nesterov", s.nesterov()}};
      break;
    }
    case Kind::kRMSprop: {
      const auto& r = static_cast<const optim::RMSpropOptions&>(o);
      g->attrs = {{"lr", r.lr()},
                  {"alpha", r.alpha()},
                  {"eps", r.eps()},
                  {"weight_decay", r.weight_decay()},
                  {"momentum", r.momentum()},
                  {"centered", r.centered()}};
      break;
    }
    case Kind::kAdagrad: {
      const auto& a = static_cast<const optim::AdagradOptions&>(o);
      g->attrs = {{"lr", a.lr()},
                  {"lr_decay", a.lr_decay()},
                  {"weight_decay", a.weight_decay()},
                  {"initial_accumulator_value", a.initial_accumulator_value()},
                  {"eps", a.eps()}};
      break;
    }
  }
}

template <typename Options>
Status read_adam_like(const Node& g, const std::string& where, Options* o) {
  CKPT_ASSIGN_OR_RETURN(double lr, need_double(g, "lr", where));
  std::vector<double> b = g.get_doubles("betas");
  if (b.size() != 2) {
    return corrupt(where + ": attribute \"betas\" should be 2 doubles, got " +
                   std::to_string(b.size()));
  }
  CKPT_ASSIGN_OR_RETURN(double eps, need_double(g, "eps", where));
  CKPT_ASSIGN_OR_RETURN(double wd, need_double(g, "weight_decay", where));
  CKPT_ASSIGN_OR_RETURN(bool amsgrad, need_bool(g, "amsgrad", where));
  o->lr(lr).betas(std::make_tuple(b[0], b[1])).eps(eps).weight_decay(wd).amsgrad(amsgrad);
  return Status::ok();
}

// New options for a group, from its node; the current options supply the concrete type.
Result<std::unique_ptr<optim::OptimizerOptions>> read_hparams(Kind k, const Node& g,
                                                              const std::string& where) {
  switch (k) {
    case Kind::kAdam: {
      auto o = std::make_unique<optim::AdamOptions>();
      CKPT_RETURN_IF_ERROR(read_adam_like(g, where, o.get()));
      return std::unique_ptr<optim::OptimizerOptions>(std::move(o));
    }
    case Kind::kAdamW: {
      auto o = std::make_unique<optim::AdamWOptions>();
      CKPT_RETURN_IF_ERROR(read_adam_like(g, where, o.get()));
      return std::unique_ptr<optim::OptimizerOptions>(std::move(o));
    }
    case Kind::kSGD: {
      CKPT_ASSIGN_OR_RETURN(double lr, need_double(g, "lr", where));
      CKPT_ASSIGN_OR_RETURN(double momentum, need_double(g, "momentum", where));
      CKPT_ASSIGN_OR_RETURN(double dampening, need_double(g, "dampening", where));
      CKPT_ASSIGN_OR_RETURN(double wd, need_double(g, "weight_decay", where));
      CKPT_ASSIGN_OR_RETURN(bool nesterov, need_bool(g, "nesterov", where));
      auto o = std::make_unique<optim::SGDOptions>(lr);
      o->momentum(momentum).dampening(dampening).weight_decay(wd).nesterov(nesterov);
      return std::unique_ptr<optim::OptimizerOptions>(std::move(o));
    }
    case Kind::kRMSprop: {
      CKPT_ASSIGN_OR_RETURN(double lr, need_double(g, "lr", where));
      CKPT_ASSIGN_OR_RETURN(double alpha, need_double(g, "alpha", where));
      CKPT_ASSIGN_OR_RETURN(double eps, need_double(g, "eps", where));
      CKPT_ASSIGN_OR_RETURN(double wd, need_double(g, "weight_decay", where));
      CKPT_ASSIGN_OR_RETURN(double momentum, need_double(g, "momentum", where));
      CKPT_ASSIGN_OR_RETURN(bool centered, need_bool(g, "centered", where));
      auto o = std::make_unique<optim::RMSpropOptions>(lr);
      o->alpha(alpha).eps(eps).weight_decay(wd).momentum(momentum).centered(centered);
      return std::unique_ptr<optim::OptimizerOptions>(std::move(o));
    }
    case Kind::kAdagrad: {
      CKPT_ASSIGN_OR_RETURN(double lr, need_double(g, "lr", where));
      CKPT_ASSIGN_OR_RETURN(double lr_decay, need_double(g, "lr_decay", where));
      CKPT_ASSIGN_OR_RETURN(double wd, need_double(g, "weight_decay", where));
      CKPT_ASSIGN_OR_RETURN(double init, need_double(g, "initial_accumulator_value", where));
      CKPT_ASSIGN_OR_RETURN(double eps, need_double(g, "eps", where));
      auto o = std::make_unique<optim::AdagradOptions>(lr);
      o->lr_decay(lr_decay).weight_decay(wd).initial_accumulator_value(init).eps(eps);
      return std::unique_ptr<optim::OptimizerOptions>(std::move(o));
    }
  }
  return internal_error("unknown optimizer kind");
}

// ---- per-parameter state

// The tensors (and step) of one parameter's state object, by schema name.
struct StateParts {
  std::map<std::string, at::Tensor> tensors;
  std::optional<int64_t> step;
};

// Adam and AdamW keep the same per-parameter state in two unrelated libtorch classes.
template <typename AdamState>
bool adam_parts(const optim::OptimizerParamState* p, StateParts* parts) {
  auto a = dynamic_cast<const AdamState*>(p);
  if (a == nullptr) return false;
  for (const auto& [name, t] : {std::pair<const char*, at::Tensor>{"exp_avg", a->exp_avg()},
                                {"exp_avg_sq", a->exp_avg_sq()},
                                {"max_exp_avg_sq", a->max_exp_avg_sq()}}) {
    if (t.defined()) parts->tensors[name] = t;
  }
  parts->step = a->step();
  return true;
}

template <typename AdamState, typename Get>
std::unique_ptr<optim::OptimizerParamState> adam_state(Get& get, int64_t step) {
  auto s = std::make_unique<AdamState>();
  s->step(step).exp_avg(get("exp_avg")).exp_avg_sq(get("exp_avg_sq"));
  s->max_exp_avg_sq(get("max_exp_avg_sq"));
  return s;
}

Result<StateParts> split_state(Kind k, const optim::OptimizerParamState& s) {
  StateParts parts;
  auto put = [&](const char* name, const at::Tensor& t) {
    if (t.defined()) parts.tensors[name] = t;
  };
  const optim::OptimizerParamState* p = &s;
  switch (k) {
    case Kind::kAdam:
      if (adam_parts<optim::AdamParamState>(p, &parts)) return parts;
      break;
    case Kind::kAdamW:
      if (adam_parts<optim::AdamWParamState>(p, &parts)) return parts;
      break;
    case Kind::kSGD:
      if (auto a = dynamic_cast<const optim::SGDParamState*>(p)) {
        put("momentum_buffer", a->momentum_buffer());
        return parts;
      }
      break;
    case Kind::kRMSprop:
      if (auto a = dynamic_cast<const optim::RMSpropParamState*>(p)) {
        put("square_avg", a->square_avg());
        put("momentum_buffer", a->momentum_buffer());
        put("grad_avg", a->grad_avg());
        parts.step = a->step();
        return parts;
      }
      break;
    case Kind::kAdagrad:
      if (auto a = dynamic_cast<const optim::AdagradParamState*>(p)) {
        put("sum", a->sum());
        parts.step = a->step();
        return parts;
      }
      break;
  }
  return internal_error(std::string("optimizer ") + kind_name(k) +
                        " holds a per-parameter state of another optimizer type");
}

// Which state tensors a parameter of a group with these options must have, and may have.
std::vector<std::string> required_tensors(Kind k, const optim::OptimizerOptions& o) {
  switch (k) {
    case Kind::kAdam:
    case Kind::kAdamW: {
      bool ams = k == Kind::kAdam ? static_cast<const optim::AdamOptions&>(o).amsgrad()
                                  : static_cast<const optim::AdamWOptions&>(o).amsgrad();
      if (ams) return {"exp_avg", "exp_avg_sq", "max_exp_avg_sq"};
      return {"exp_avg", "exp_avg_sq"};
    }
    case Kind::kSGD:
      return {"momentum_buffer"};
    case Kind::kRMSprop: {
      const auto& r = static_cast<const optim::RMSpropOptions&>(o);
      std::vector<std::string> names = {"square_avg"};
      if (r.momentum() > 0) names.push_back("momentum_buffer");
      if (r.centered()) names.push_back("grad_avg");
      return names;
    }
    case Kind::kAdagrad:
      return {"sum"};
  }
  return {};
}

bool has_step(Kind k) { return k != Kind::kSGD; }

std::unique_ptr<optim::OptimizerParamState> build_state(Kind k, std::map<std::string, at::Tensor> t,
                                                        int64_t step) {
  auto get = [&](const char* name) { return t.count(name) ? t[name] : at::Tensor(); };
  switch (k) {
    case Kind::kAdam:
      return adam_state<optim::AdamParamState>(get, step);
    case Kind::kAdamW:
      return adam_state<optim::AdamWParamState>(get, step);
    case Kind::kSGD: {
      auto s = std::make_unique<optim::SGDParamState>();
      s->momentum_buffer(get("momentum_buffer"));
      return s;
    }
    case Kind::kRMSprop: {
      auto s = std::make_unique<optim::RMSpropParamState>();
      s->step(step).square_avg(get("square_avg"));
      s->momentum_buffer(get("momentum_buffer")).grad_avg(get("grad_avg"));
      return s;
    }
    case Kind::kAdagrad: {
      auto s = std::make_unique<optim::AdagradParamState>();
      s->sum(get("sum")).step(step);
      return s;
    }
  }
  return nullptr;
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

Result<std::string> optimizer_type(const optim::Optimizer& opt) {
  CKPT_ASSIGN_OR_RETURN(Kind k, detect(opt));
  return std::string(kind_name(k));
}

Status capture_optimizer(const optim::Optimizer& opt, const torch::nn::Module& m, Node* out) {
  CKPT_ASSIGN_OR_RETURN(Kind k, detect(opt));
  CKPT_ASSIGN_OR_RETURN(auto group_names, name_params(opt, m));
  Node node;
  std::vector<std::string> all_names;
  Node& groups = node.child("groups");
  Node& states = node.child("state");
  const auto& state_map = opt.state();
  for (size_t g = 0; g < group_names.size(); ++g) {
    const optim::OptimizerParamGroup& group = opt.param_groups()[g];
    Node& gn = groups.child(std::to_string(g));
    write_hparams(k, group.options(), &gn);
    gn.attrs["params"] = group_names[g];
    for (size_t i = 0; i < group.params().size(); ++i) {
      const std::string& name = group_names[g][i];
      all_names.push_back(name);
      auto it = state_map.find(compat::state_key(group.params()[i]));
      if (it == state_map.end() || states.find_child(name) != nullptr) continue;
      CKPT_ASSIGN_OR_RETURN(StateParts parts, split_state(k, *it->second));
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
  node.attrs["type"] = std::string(kind_name(k));
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
at::Tensor reusable(Kind k, const optim::Optimizer& opt, const at::Tensor& param,
                    const std::string& tname) {
  auto it = opt.state().find(compat::state_key(param));
  if (it == opt.state().end()) return {};
  Result<StateParts> parts = split_state(k, *it->second);
  if (!parts.is_ok()) return {};
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
  CKPT_ASSIGN_OR_RETURN(Kind k, detect(opt));
  const std::string saved_type = in.get_string("type");
  if (saved_type != kind_name(k)) {
    return mismatch(std::string("optimizer type mismatch (expected ") + kind_name(k) + ", got " +
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
    CKPT_ASSIGN_OR_RETURN(auto options, read_hparams(k, *gn, where));
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
      std::vector<std::string> need = required_tensors(k, opts);
      std::map<std::string, at::Tensor> tensors;
      for (const std::string& tname : need) {
        const std::string path = "optimizer/state/" + name + "/" + tname;
        const Tensor* t = sn.find_tensor(tname);
        if (t == nullptr) return not_found("tensor " + in_quotes(path) + " is missing");
        CKPT_RETURN_IF_ERROR(check_dtype_shape(*t, p->second, path));
        at::Tensor target = reusable(k, opt, p->second, tname);
        const bool fresh = !target.defined();
        try {
          if (fresh) target = at::empty(p->second.sizes(), p->second.options());
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
                          " is not used by " + kind_name(k) + " with this group's options");
        }
      }
      int64_t step = 0;
      if (has_step(k)) {
        CKPT_ASSIGN_OR_RETURN(step, need_int(sn, "step", "optimizer state of " + in_quotes(name)));
      }
      out.state[name] = build_state(k, std::move(tensors), step);
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
