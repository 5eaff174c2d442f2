// capture_model / restore_model: round trip, tied weights, overlap refusal, strict errors.
#include "ckpt/torch/model_state.h"

#include <cstring>

#include "torch_catch.h"

using namespace ckpt;
using namespace ckpt::torch_adapter;

namespace {

struct NetImpl : torch::nn::Module {
  explicit NetImpl(int64_t hidden = 8, torch::Dtype dtype = torch::kFloat32)
      : fc(register_module("fc", torch::nn::Linear(4, hidden))),
        bn(register_module("bn", torch::nn::BatchNorm1d(hidden))) {
    if (dtype != torch::kFloat32) to(dtype);  // to() would also turn the int64 counter to float
  }
  torch::Tensor forward(torch::Tensor x) { return bn(fc(x)); }
  torch::nn::Linear fc;
  torch::nn::BatchNorm1d bn;
};
TORCH_MODULE(Net);

// Two names, one tensor: the embedding and an output projection share their weight.
struct TiedImpl : torch::nn::Module {
  explicit TiedImpl(bool tie = true) : emb(register_module("emb", torch::nn::Embedding(10, 4))) {
    proj_weight = register_parameter("proj_weight", tie ? emb->weight : torch::randn({10, 4}));
  }
  torch::nn::Embedding emb;
  torch::Tensor proj_weight;
};
TORCH_MODULE(Tied);

bool bitwise_equal(const at::Tensor& a, const at::Tensor& b) {
  if (a.scalar_type() != b.scalar_type() || a.sizes() != b.sizes()) return false;
  at::Tensor ca = a.contiguous(), cb = b.contiguous();
  return std::memcmp(ca.data_ptr(), cb.data_ptr(), ca.numel() * ca.element_size()) == 0;
}

void check_modules_equal(const torch::nn::Module& a, const torch::nn::Module& b) {
  auto pa = a.named_parameters(), pb = b.named_parameters();
  REQUIRE(pa.size() == pb.size());
  for (const auto& item : pa) {
    INFO(item.key());
    CHECK(bitwise_equal(item.value(), pb[item.key()]));
  }
  auto ba = a.named_buffers(), bb = b.named_buffers();
  REQUIRE(ba.size() == bb.size());
  for (const auto& item : ba) {
    INFO(item.key());
    CHECK(bitwise_equal(item.value(), bb[item.key()]));
  }
}

}  // namespace

TEST_CASE("model round trip into a fresh module is bitwise exact", "[torch]") {
  torch::manual_seed(1);
  Net a;
  a->train();
  for (int i = 0; i < 3; ++i) a->forward(torch::randn({5, 4}));  // moves the running stats
  REQUIRE_FALSE(torch::equal(a->bn->running_mean, torch::zeros({8})));

  Node node;
  REQUIRE(capture_model(*a, &node).is_ok());
  CHECK(node.get_strings("param_names") ==
        std::vector<std::string>{"fc.weight", "fc.bias", "bn.weight", "bn.bias"});
  CHECK(node.get_strings("buffer_names") ==
        std::vector<std::string>{"bn.running_mean", "bn.running_var", "bn.num_batches_tracked"});
  CHECK(node.find_tensor("bn.num_batches_tracked")->dtype == DType::kInt64);

  torch::manual_seed(2);
  Net b;
  REQUIRE_FALSE(torch::equal(a->fc->weight, b->fc->weight));
  Status s = restore_model(node, *b);
  REQUIRE(s.is_ok());
  check_modules_equal(*a, *b);
}

TEST_CASE("tied weights are stored once and checked on restore", "[torch]") {
  Tied a;
  Node node;
  REQUIRE(capture_model(*a, &node).is_ok());
  // A module's own parameters come before its children's, so "proj_weight" is written first.
  CHECK(node.get_strings("param_names") == std::vector<std::string>{"proj_weight", "emb.weight"});
  const Tensor* alias = node.find_tensor("emb.weight");
  REQUIRE(alias != nullptr);
  CHECK(alias->alias_of == "proj_weight");
  CHECK(alias->nbytes == 0);
  CHECK(alias->shape == std::vector<int64_t>{10, 4});
  CHECK(node.find_tensor("proj_weight")->nbytes == 160);

  Tied b;
  REQUIRE(restore_model(node, *b).is_ok());
  CHECK(torch::equal(b->emb->weight, a->emb->weight));
  CHECK(b->proj_weight.data_ptr() == b->emb->weight.data_ptr());

  Tied untied(false);
  Status s = restore_model(node, *untied);
  CHECK(s.code() == Code::kMismatch);
  CHECK_THAT(s.message(),
             Catch::Contains("\"emb.weight\" is saved as an alias of \"proj_weight\""));

  // The reverse: tied in the module, saved separately.
  Node separate;
  REQUIRE(capture_model(*untied, &separate).is_ok());
  s = restore_model(separate, *b);
  CHECK(s.code() == Code::kMismatch);
  CHECK_THAT(s.message(), Catch::Contains("\"emb.weight\" is tied to \"proj_weight\""));
}

TEST_CASE("partially overlapping tensors are refused, disjoint views are not", "[torch]") {
  struct Views : torch::nn::Module {
    Views(int64_t a, int64_t b) {
      at::Tensor whole = register_parameter("whole", torch::arange(8, torch::kFloat32));
      register_buffer("part", whole.detach().narrow(0, a, b));
    }
  };
  Views overlap(2, 4);
  Node node;
  Status s = capture_model(overlap, &node);
  CHECK(s.code() == Code::kUnsupported);
  CHECK_THAT(s.message(),
             Catch::Contains("whole") && Catch::Contains("part") && Catch::Contains("overlap"));

  struct Halves : torch::nn::Module {
    Halves() {
      at::Tensor base = torch::arange(8, torch::kFloat32);
      register_buffer("lo", base.narrow(0, 0, 4));
      register_buffer("hi", base.narrow(0, 4, 4));
    }
  };
  Halves halves;
  REQUIRE(capture_model(halves, &node).is_ok());
  CHECK(node.find_tensor("hi")->alias_of.empty());
  CHECK(static_cast<const float*>(node.find_tensor("hi")->data)[0] == 4.0f);
}

TEST_CASE("restore_model errors name the tensor", "[torch]") {
  Net a;
  Node node;
  REQUIRE(capture_model(*a, &node).is_ok());

  SECTION("shape") {
    Net wide(16);
    Status s = restore_model(node, *wide);
    CHECK(s.code() == Code::kMismatch);
    CHECK_THAT(s.message(),
               Catch::Contains("\"fc.weight\"") && Catch::Contains("expected [16, 4], got [8, 4]"));
  }
  SECTION("dtype") {
    Net dbl(8, torch::kFloat64);
    Status s = restore_model(node, *dbl);
    CHECK(s.code() == Code::kMismatch);
    CHECK_THAT(s.message(), Catch::Contains("\"fc.weight\"") &&
                                Catch::Contains("expected float64, got float32"));
  }
  SECTION("missing from the checkpoint") {
    node.tensors.erase("bn.running_var");
    Net b;
    Status s = restore_model(node, *b);
    CHECK(s.code() == Code::kNotFound);
    CHECK_THAT(s.message(), Catch::Contains("bn.running_var"));
  }
  SECTION("extra in the checkpoint") {
    node.tensors["head.weight"] = node.tensors.at("fc.weight");
    Net b;
    Status s = restore_model(node, *b);
    CHECK(s.code() == Code::kMismatch);
    CHECK_THAT(s.message(), Catch::Contains("head.weight"));
  }
  SECTION("a failed restore leaves the module untouched") {
    node.tensors.erase("bn.running_var");
    Net b;
    at::Tensor before = b->fc->weight.clone();
    REQUIRE_FALSE(restore_model(node, *b).is_ok());
    CHECK(torch::equal(before, b->fc->weight));
  }
}
