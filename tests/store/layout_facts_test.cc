// The format's facts that the C++ writers, the auditor and the Python package share
// (ckpt/format/torch_layout.h, rank_root.h): the one conversion between the adapter's and
// torch's optimizer layouts, the root attributes and the environment record.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "ckpt/format/rank_root.h"
#include "ckpt/format/torch_layout.h"
#include "ckpt/io/mem_env.h"

namespace ckpt::layout_facts_test {
namespace {

// An AdamW over two parameters in the adapter layout; "b" has no state yet; 11 parameters'
// worth of names make "10" sort before "2" as strings.
Node adapter_optimizer() {
  Node n;
  n.attrs["type"] = std::string("adamw");
  std::vector<std::string> names;
  for (int i = 0; i < 11; ++i) names.push_back("p" + std::to_string(i));
  n.attrs["param_names"] = names;
  Node& g0 = n.child("groups").child("0");
  g0.attrs["lr"] = 0.01;
  g0.attrs["betas"] = std::vector<double>{0.9, 0.999};
  g0.attrs["params"] = std::vector<std::string>{"p0", "p1"};
  Node& g1 = n.child("groups").child("1");
  g1.attrs["lr"] = 0.5;
  std::vector<std::string> rest(names.begin() + 2, names.end());
  g1.attrs["params"] = rest;
  static const float moment[2] = {1.5f, -2.0f};
  for (const char* p : {"p0", "p10", "p2"}) {
    Node& s = n.child("state").child(p);
    s.tensors["exp_avg"] = Tensor::borrow(DType::kFloat32, {2}, moment, sizeof moment);
    s.attrs["step"] = int64_t{7};
  }
  return n;
}

TEST_CASE("an adapter-layout optimizer in torch's layout and back is the same", "[format]") {
  const Node in = adapter_optimizer();
  REQUIRE(is_adapter_optimizer_layout(in));
  REQUIRE_FALSE(is_torch_layout(in));
  std::map<std::string, std::string> sources;
  auto torch = to_torch_layout(in, TorchLayoutKind::kOptimizer, &sources);
  REQUIRE(torch.is_ok());
  REQUIRE(is_torch_optimizer_layout(*torch));
  const Node& state = *torch->find_child("state");
  REQUIRE(state.get_string(kTorchLayoutKindAttr) == "intdict");
  // torch numbers parameters in param-group order: p10 is 10, not the 2nd name as a string
  REQUIRE(state.get_strings("ckpt.order") == std::vector<std::string>{"0", "2", "10"});
  REQUIRE(state.find_child("10")->get_int("step") == 7);
  REQUIRE(sources.at("state/10/exp_avg") == "state/p10/exp_avg");
  REQUIRE(sources.size() == 3);
  const Node& groups = *torch->find_child("param_groups");
  REQUIRE(groups.get_int("ckpt.len") == 2);
  REQUIRE(groups.find_child("0")->get_ints("params") == std::vector<int64_t>{0, 1});
  REQUIRE(groups.find_child("0")->get_strings("ckpt.tuples") == std::vector<std::string>{"betas"});
  REQUIRE(groups.find_child("1")->get_ints("params").back() == 10);

  auto back = optimizer_from_torch_layout(*torch, in.get_strings("param_names"), "adamw");
  REQUIRE(back.is_ok());
  REQUIRE(back->get_string("type") == "adamw");
  REQUIRE(back->get_strings("param_names") == in.get_strings("param_names"));
  for (const char* g : {"0", "1"}) {
    const Node& a = *in.find_child("groups")->find_child(g);
    const Node& b = *back->find_child("groups")->find_child(g);
    REQUIRE(a.get_strings("params") == b.get_strings("params"));
    REQUIRE(a.get_double("lr") == b.get_double("lr"));
  }
  REQUIRE(back->find_child("groups")->find_child("0")->get_doubles("betas") ==
          std::vector<double>{0.9, 0.999});
  for (const auto& [name, s] : in.find_child("state")->children) {
    const Node* t = back->find_child("state")->find_child(name);
    REQUIRE(t != nullptr);
    REQUIRE(t->get_int("step") == 7);
    REQUIRE(t->find_tensor("exp_avg")->data == s.find_tensor("exp_avg")->data);  // shared
  }
}

TEST_CASE("the conversion names what does not fit", "[format]") {
  Node in = adapter_optimizer();
  in.child("state").child("ghost").attrs["step"] = int64_t{1};
  auto torch = to_torch_layout(in, TorchLayoutKind::kOptimizer);
  REQUIRE(torch.status().code() == Code::kCorrupt);
  REQUIRE(torch.status().message().find("state/ghost") != std::string::npos);

  auto ok = to_torch_layout(adapter_optimizer(), TorchLayoutKind::kOptimizer);
  REQUIRE(ok.is_ok());
  auto few = optimizer_from_torch_layout(*ok, {"p0", "p1"}, "adamw");
  REQUIRE(few.status().code() == Code::kMismatch);
  REQUIRE(few.status().message().find("parameter index") != std::string::npos);
}

TEST_CASE("a module in torch's layout drops the adapter's name lists only", "[format]") {
  Node m;
  m.attrs["param_names"] = std::vector<std::string>{"w"};
  m.attrs["buffer_names"] = std::vector<std::string>{};
  static const float w = 1;
  m.tensors["w"] = Tensor::borrow(DType::kFloat32, {}, &w, sizeof w);
  std::map<std::string, std::string> sources;
  auto t = to_torch_layout(m, TorchLayoutKind::kModule, &sources);
  REQUIRE(t.is_ok());
  REQUIRE(t->attrs.empty());
  REQUIRE(t->tensors.count("w") == 1);
  REQUIRE(sources == std::map<std::string, std::string>{{"w", "w"}});
}

TEST_CASE("scalar_value reads one-element float and int64 tensors with bytes", "[format]") {
  const float f = 3.0f;
  const int64_t i = 12;
  const double d = 0.25;
  REQUIRE(scalar_value(Tensor::borrow(DType::kFloat32, {}, &f, 4)) == 3.0);
  REQUIRE(scalar_value(Tensor::borrow(DType::kInt64, {1}, &i, 8)) == 12.0);
  REQUIRE(scalar_value(Tensor::borrow(DType::kFloat64, {}, &d, 8)) == 0.25);
  REQUIRE_FALSE(scalar_value(Tensor::borrow(DType::kInt32, {}, &i, 4)));
  Tensor meta;  // metadata only
  meta.dtype = DType::kFloat32;
  REQUIRE_FALSE(scalar_value(meta));
}

TEST_CASE("the root attributes and the environment record have one spelling", "[format]") {
  Node root;
  set_root_attrs({"ckpt 0.1.0", "2.1.0", 12, 1, 2, {"model", "train"}}, &root);
  REQUIRE(root.get_string("format") == kFormatName);
  REQUIRE(root.get_int("format_version") == kFormatVersion);
  REQUIRE(root.get_string("producer") == "ckpt 0.1.0");
  REQUIRE(root.get_string("libtorch_version") == "2.1.0");
  REQUIRE(root.get_int("step") == 12);
  REQUIRE(root.get_int("rank") == 1);
  REQUIRE(root.get_int("world_size") == 2);
  REQUIRE(root.get_strings("components") == std::vector<std::string>{"model", "train"});

  EnvironmentRecord env;
  env.libtorch = "2.1.0";
  env.toolchain = "gcc 12";
  env.cuda_available = true;
  env.cuda_devices = 2;
  env.cuda_runtime = "12.4";
  env.host = "h";
  REQUIRE(environment_json(env) ==
          "{\"compiler\":\"gcc 12\",\"cuda_available\":true,\"cuda_devices\":2,"
          "\"cuda_runtime\":\"12.4\",\"host\":\"h\",\"libtorch\":\"2.1.0\"}");
  env.toolchain_key = "python";
  REQUIRE(nlohmann::json::parse(environment_json(env)).at("python") == "gcc 12");
}

TEST_CASE("a lock another holder has is kLocked", "[format]") {
  MemEnv env;
  REQUIRE(env.make_dirs("/run").is_ok());
  auto first = env.lock_file("/run/LOCK", "pid 1 host h");
  REQUIRE(first.is_ok());
  auto second = env.lock_file("/run/LOCK", "pid 2 host h");
  REQUIRE(second.status().code() == Code::kLocked);
  REQUIRE(second.status().to_string() == "locked: /run/LOCK: locked by pid 1 host h");
}

}  // namespace
}  // namespace ckpt::layout_facts_test
