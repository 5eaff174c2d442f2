// Exact resume of every supported optimizer (and StepLR): N steps, capture, fresh objects,
// restore, M more steps == N+M uninterrupted steps, bit for bit; and without the optimizer state
// the parameters differ, so the check can fail.
#include "ckpt/torch/optimizer_state.h"

#include <algorithm>
#include <cstring>
#include <functional>
#include <map>

#include "ckpt/torch/model_state.h"
#include "ckpt/torch/scheduler_state.h"
#include "torch_catch.h"

using namespace ckpt;
using namespace ckpt::torch_adapter;

namespace {

struct MlpImpl : torch::nn::Module {
  MlpImpl()
      : fc1(register_module("fc1", torch::nn::Linear(4, 8))),
        fc2(register_module("fc2", torch::nn::Linear(8, 2))) {}
  torch::Tensor forward(torch::Tensor x) { return fc2(torch::tanh(fc1(x))); }
  torch::nn::Linear fc1, fc2;
};
TORCH_MODULE(Mlp);

using MakeOptimizer = std::function<std::unique_ptr<torch::optim::Optimizer>(Mlp&)>;

constexpr int kN = 6;
constexpr int kM = 5;

struct Batches {
  std::vector<at::Tensor> x, y;
  Batches() {
    torch::Generator gen = at::detail::createCPUGenerator(99);
    for (int i = 0; i < kN + kM; ++i) {
      x.push_back(torch::randn({16, 4}, gen));
      y.push_back(torch::randn({16, 2}, gen));
    }
  }
};

const Batches& batches() {
  static const Batches b;
  return b;
}

Mlp make_net(uint64_t seed) {
  torch::manual_seed(seed);
  return Mlp();
}

void train(Mlp& net, torch::optim::Optimizer& opt, int from, int to,
           ResumableStepLR* sched = nullptr) {
  for (int i = from; i < to; ++i) {
    opt.zero_grad();
    at::Tensor loss = torch::mse_loss(net->forward(batches().x[i]), batches().y[i]);
    loss.backward();
    opt.step();
    if (sched != nullptr) sched->step();
  }
}

bool params_bitwise_equal(Mlp& a, Mlp& b) {
  auto pa = a->parameters(), pb = b->parameters();
  for (size_t i = 0; i < pa.size(); ++i) {
    if (std::memcmp(pa[i].data_ptr(), pb[i].data_ptr(), pa[i].numel() * 4) != 0) return false;
  }
  return true;
}

void check_exact_resume(const MakeOptimizer& make) {
  Mlp full = make_net(1);
  auto full_opt = make(full);
  train(full, *full_opt, 0, kN + kM);

  Mlp first = make_net(1);
  auto first_opt = make(first);
  train(first, *first_opt, 0, kN);
  Node model_node, opt_node;
  REQUIRE(capture_model(*first, &model_node).is_ok());
  REQUIRE(capture_optimizer(*first_opt, *first, &opt_node).is_ok());

  Mlp resumed = make_net(7);
  auto resumed_opt = make(resumed);
  REQUIRE(restore_model(model_node, *resumed).is_ok());
  Status s = restore_optimizer(opt_node, *resumed_opt, *resumed);
  INFO(s.to_string());
  REQUIRE(s.is_ok());
  train(resumed, *resumed_opt, kN, kN + kM);
  CHECK(params_bitwise_equal(full, resumed));

  // Model only: the optimizer starts from scratch and the run diverges.
  Mlp model_only = make_net(7);
  auto fresh_opt = make(model_only);
  REQUIRE(restore_model(model_node, *model_only).is_ok());
  train(model_only, *fresh_opt, kN, kN + kM);
  CHECK_FALSE(params_bitwise_equal(full, model_only));
}

// Two param groups with different hyperparameters, and an lr changed mid-run (as a scheduler
// would), so restore must bring back per-group hyperparameters, not the constructor's.
template <typename Opt, typename Options>
MakeOptimizer two_groups(Options base) {
  return [base](Mlp& net) -> std::unique_ptr<torch::optim::Optimizer> {
    std::vector<torch::optim::OptimizerParamGroup> groups;
    groups.emplace_back(net->fc1->parameters());
    Options second = base;
    second.lr(base.lr() * 0.5);
    groups.emplace_back(net->fc2->parameters(), std::make_unique<Options>(second));
    auto opt = std::make_unique<Opt>(std::move(groups), base);
    return opt;
  };
}

}  // namespace

TEST_CASE("Adam resumes exactly", "[torch]") {
  check_exact_resume([](Mlp& n) {
    return std::make_unique<torch::optim::Adam>(n->parameters(), torch::optim::AdamOptions(1e-2));
  });
}

TEST_CASE("Adam with amsgrad and two groups resumes exactly", "[torch]") {
  check_exact_resume(two_groups<torch::optim::Adam>(
      torch::optim::AdamOptions(1e-2).amsgrad(true).weight_decay(1e-3)));
}

TEST_CASE("AdamW resumes exactly, amsgrad off and on", "[torch]") {
  for (bool ams : {false, true}) {
    INFO("amsgrad " << ams);
    check_exact_resume(two_groups<torch::optim::AdamW>(
        torch::optim::AdamWOptions(1e-2).amsgrad(ams).betas({0.8, 0.99})));
  }
}

TEST_CASE("SGD with nesterov momentum resumes exactly", "[torch]") {
  check_exact_resume(two_groups<torch::optim::SGD>(
      torch::optim::SGDOptions(0.05).momentum(0.9).nesterov(true).weight_decay(1e-4)));
}

TEST_CASE("RMSprop centered with momentum resumes exactly", "[torch]") {
  check_exact_resume(two_groups<torch::optim::RMSprop>(
      torch::optim::RMSpropOptions(1e-2).centered(true).momentum(0.5)));
}

TEST_CASE("Adagrad resumes exactly", "[torch]") {
  check_exact_resume(two_groups<torch::optim::Adagrad>(
      torch::optim::AdagradOptions(0.1).lr_decay(0.01).initial_accumulator_value(0.1)));
}

namespace {

// Per kind of optimizer_kinds(): its on-disk schema (optimizer_state.h, docs/format.md: the
// contract the table must list), one optimizer with every hyperparameter off its default and
// every optional state tensor in use, and one with the defaults, into which a restore must set
// each hyperparameter.
struct KindCase {
  std::vector<std::string> hyperparameters, state_tensors;
  bool has_step;
  MakeOptimizer tuned, plain;
};

const std::map<std::string, KindCase>& kind_cases() {
  namespace o = torch::optim;
  using P = std::unique_ptr<o::Optimizer>;
  static const std::map<std::string, KindCase> cases = {
      {"adam",
       {{"lr", "betas", "eps", "weight_decay", "amsgrad"},
        {"exp_avg", "exp_avg_sq", "max_exp_avg_sq"},
        true,
        [](Mlp& n) -> P {
          return std::make_unique<o::Adam>(
              n->parameters(),
              o::AdamOptions(0.02).betas({0.8, 0.95}).eps(1e-6).weight_decay(0.01).amsgrad(true));
        },
        [](Mlp& n) -> P { return std::make_unique<o::Adam>(n->parameters()); }}},
      {"adamw",
       {{"lr", "betas", "eps", "weight_decay", "amsgrad"},
        {"exp_avg", "exp_avg_sq", "max_exp_avg_sq"},
        true,
        [](Mlp& n) -> P {
          return std::make_unique<o::AdamW>(
              n->parameters(),
              o::AdamWOptions(0.02).betas({0.8, 0.95}).eps(1e-6).weight_decay(0.05).amsgrad(true));
        },
        [](Mlp& n) -> P { return std::make_unique<o::AdamW>(n->parameters()); }}},
      {"sgd",
       {{"lr", "momentum", "dampening", "weight_decay", "nesterov"},
        {"momentum_buffer"},
        false,
        [](Mlp& n) -> P {
          return std::make_unique<o::SGD>(
              n->parameters(),
              o::SGDOptions(0.05).momentum(0.9).dampening(0).weight_decay(1e-3).nesterov(true));
        },
        [](Mlp& n) -> P { return std::make_unique<o::SGD>(n->parameters(), o::SGDOptions(0.5)); }}},
      {"rmsprop",
       {{"lr", "alpha", "eps", "weight_decay", "momentum", "centered"},
        {"square_avg", "momentum_buffer", "grad_avg"},
        true,
        [](Mlp& n) -> P {
          return std::make_unique<o::RMSprop>(n->parameters(), o::RMSpropOptions(0.02)
                                                                   .alpha(0.9)
                                                                   .eps(1e-6)
                                                                   .weight_decay(1e-3)
                                                                   .momentum(0.5)
                                                                   .centered(true));
        },
        [](Mlp& n) -> P { return std::make_unique<o::RMSprop>(n->parameters()); }}},
      {"adagrad",
       {{"lr", "lr_decay", "weight_decay", "initial_accumulator_value", "eps"},
        {"sum"},
        true,
        [](Mlp& n) -> P {
          return std::make_unique<o::Adagrad>(n->parameters(), o::AdagradOptions(0.2)
                                                                   .lr_decay(0.01)
                                                                   .weight_decay(1e-3)
                                                                   .initial_accumulator_value(0.1)
                                                                   .eps(1e-6));
        },
        [](Mlp& n) -> P { return std::make_unique<o::Adagrad>(n->parameters()); }}},
  };
  return cases;
}

std::vector<std::string> sorted_keys(const std::map<std::string, AttrValue>& attrs) {
  std::vector<std::string> keys;
  for (const auto& [k, v] : attrs) {
    if (k != "params") keys.push_back(k);
  }
  return keys;
}

bool same_bytes(const Tensor& a, const Tensor& b) {
  return a.dtype == b.dtype && a.shape == b.shape && a.nbytes == b.nbytes &&
         std::memcmp(a.data, b.data, a.nbytes) == 0;
}

}  // namespace

TEST_CASE("every optimizer kind of the table round-trips what the table lists", "[torch]") {
  const std::vector<OptimizerKindInfo> kinds = optimizer_kinds();
  CHECK(kinds.size() == kind_cases().size());
  for (const OptimizerKindInfo& kind : kinds) {
    INFO("kind " << kind.name);
    auto c = kind_cases().find(kind.name);
    REQUIRE(c != kind_cases().end());  // a kind added to the table needs its case above
    CHECK(kind.hyperparameters == c->second.hyperparameters);
    CHECK(kind.state_tensors == c->second.state_tensors);
    CHECK(kind.has_step == c->second.has_step);
    Mlp net = make_net(1);
    auto tuned = c->second.tuned(net);
    train(net, *tuned, 0, 3);
    Node saved;
    REQUIRE(capture_optimizer(*tuned, *net, &saved).is_ok());
    CHECK(saved.get_string("type") == kind.name);
    const Node& group = saved.children.at("groups").children.at("0");
    std::vector<std::string> hparams = kind.hyperparameters;
    std::sort(hparams.begin(), hparams.end());
    CHECK(sorted_keys(group.attrs) == hparams);
    const Node& state = saved.children.at("state").children.at("fc1.weight");
    std::vector<std::string> tensors;
    for (const auto& [name, t] : state.tensors) tensors.push_back(name);
    std::vector<std::string> listed = kind.state_tensors;
    std::sort(listed.begin(), listed.end());
    CHECK(tensors == listed);
    CHECK((state.find_attr("step") != nullptr) == kind.has_step);
    if (kind.has_step) CHECK(state.get_int("step") == 3);

    // Into an optimizer with the defaults, then captured again: the same node, bit for bit.
    Mlp fresh = make_net(7);
    auto plain = c->second.plain(fresh);
    Status s = restore_optimizer(saved, *plain, *fresh);
    INFO(s.to_string());
    REQUIRE(s.is_ok());
    Node again;
    REQUIRE(capture_optimizer(*plain, *fresh, &again).is_ok());
    // (Parenthesised: Catch cannot print attribute maps.)
    CHECK((again.attrs == saved.attrs));
    CHECK((again.children.at("groups").children.at("0").attrs == group.attrs));
    const auto& states = saved.children.at("state").children;
    const auto& states_again = again.children.at("state").children;
    REQUIRE(states_again.size() == states.size());
    for (const auto& [param, sn] : states) {
      const Node& sa = states_again.at(param);
      CHECK((sa.attrs == sn.attrs));
      REQUIRE(sa.tensors.size() == sn.tensors.size());
      for (const auto& [tname, t] : sn.tensors) {
        INFO(param << "/" << tname);
        CHECK(same_bytes(sa.tensors.at(tname), t));
      }
    }
  }
}

TEST_CASE("optimizer node layout", "[torch]") {
  Mlp net = make_net(1);
  torch::optim::Adam opt(net->parameters(), torch::optim::AdamOptions(1e-3).amsgrad(true));
  train(net, opt, 0, 2);
  Node node;
  REQUIRE(capture_optimizer(opt, *net, &node).is_ok());
  CHECK(node.get_string("type") == "adam");
  const std::vector<std::string> names = {"fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"};
  CHECK(node.get_strings("param_names") == names);
  const Node& g0 = node.children.at("groups").children.at("0");
  CHECK(g0.get_strings("params") == names);
  CHECK(g0.get_doubles("betas") == std::vector<double>{0.9, 0.999});
  CHECK(g0.get_bool("amsgrad"));
  CHECK(g0.get_double("lr") == 1e-3);
  const Node& st = node.children.at("state").children.at("fc1.weight");
  CHECK(st.get_int("step") == 2);
  CHECK(st.tensors.count("exp_avg") == 1);
  CHECK(st.tensors.count("exp_avg_sq") == 1);
  CHECK(st.tensors.at("max_exp_avg_sq").shape == std::vector<int64_t>{8, 4});
}

TEST_CASE("optimizer capture and restore refuse what they cannot do", "[torch]") {
  Mlp net = make_net(1);
  SECTION("LBFGS") {
    torch::optim::LBFGS lbfgs(net->parameters());
    Node node;
    Status s = capture_optimizer(lbfgs, *net, &node);
    CHECK(s.code() == Code::kUnsupported);
    CHECK_THAT(s.message(), Catch::Contains("LBFGS"));
  }
  SECTION("a parameter the module does not own") {
    std::vector<at::Tensor> params = net->parameters();
    params.push_back(torch::zeros({3}, torch::requires_grad()));
    torch::optim::SGD sgd(params, torch::optim::SGDOptions(0.1));
    Node node;
    Status s = capture_optimizer(sgd, *net, &node);
    CHECK(s.code() == Code::kInvalidArgument);
    CHECK_THAT(s.message(), Catch::Contains("#4"));
  }
  SECTION("another optimizer type") {
    torch::optim::Adam adam(net->parameters());
    train(net, adam, 0, 1);
    Node node;
    REQUIRE(capture_optimizer(adam, *net, &node).is_ok());
    torch::optim::SGD sgd(net->parameters(), torch::optim::SGDOptions(0.1));
    Status s = restore_optimizer(node, sgd, *net);
    CHECK(s.code() == Code::kMismatch);
    CHECK_THAT(s.message(), Catch::Contains("expected sgd") && Catch::Contains("adam"));
  }
  SECTION("a moment with the wrong shape") {
    torch::optim::Adam adam(net->parameters());
    train(net, adam, 0, 1);
    Node node;
    REQUIRE(capture_optimizer(adam, *net, &node).is_ok());
    Tensor& m = node.children["state"].children["fc2.bias"].tensors["exp_avg"];
    m.shape = {1, 2};
    torch::optim::Adam fresh(net->parameters());
    Status s = restore_optimizer(node, fresh, *net);
    CHECK(s.code() == Code::kMismatch);
    CHECK_THAT(s.message(),
               Catch::Contains("fc2.bias/exp_avg") && Catch::Contains("expected [2], got [1, 2]"));
    CHECK(fresh.state().empty());
  }
}

TEST_CASE("StepLR resumes exactly through ResumableStepLR", "[torch]") {
  auto make = [](Mlp& n) {
    return std::make_unique<torch::optim::SGD>(n->parameters(),
                                               torch::optim::SGDOptions(0.1).momentum(0.9));
  };
  Mlp full = make_net(1);
  auto full_opt = make(full);
  ResumableStepLR full_sched(*full_opt, 4, 0.5);
  train(full, *full_opt, 0, kN + kM, &full_sched);

  Mlp first = make_net(1);
  auto first_opt = make(first);
  ResumableStepLR first_sched(*first_opt, 4, 0.5);
  train(first, *first_opt, 0, kN, &first_sched);
  Node m, o, s;
  REQUIRE(capture_model(*first, &m).is_ok());
  REQUIRE(capture_optimizer(*first_opt, *first, &o).is_ok());
  REQUIRE(capture_step_lr(first_sched, &s).is_ok());
  CHECK(s.get_int("step_count") == kN);
  CHECK(s.get_doubles("last_lr") == std::vector<double>{0.05});

  Mlp resumed = make_net(3);
  auto resumed_opt = make(resumed);
  ResumableStepLR resumed_sched(*resumed_opt, 4, 0.5);
  REQUIRE(restore_model(m, *resumed).is_ok());
  REQUIRE(restore_optimizer(o, *resumed_opt, *resumed).is_ok());
  REQUIRE(restore_step_lr(s, resumed_sched).is_ok());
  train(resumed, *resumed_opt, kN, kN + kM, &resumed_sched);
  CHECK(params_bitwise_equal(full, resumed));
  CHECK(resumed_opt->param_groups()[0].options().get_lr() ==
        full_opt->param_groups()[0].options().get_lr());

  // Without the scheduler's position the decay lands on different steps.
  Mlp no_sched = make_net(3);
  auto no_sched_opt = make(no_sched);
  ResumableStepLR fresh_sched(*no_sched_opt, 4, 0.5);
  REQUIRE(restore_model(m, *no_sched).is_ok());
  REQUIRE(restore_optimizer(o, *no_sched_opt, *no_sched).is_ok());
  train(no_sched, *no_sched_opt, kN, kN + kM, &fresh_sched);
  CHECK_FALSE(params_bitwise_equal(full, no_sched));

  ResumableStepLR other(*no_sched_opt, 5, 0.5);
  Status st = restore_step_lr(s, other);
  CHECK(st.code() == Code::kMismatch);
  CHECK_THAT(st.message(), Catch::Contains("step_size") && Catch::Contains("expected 5"));
}
