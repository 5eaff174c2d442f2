// capture_rng / restore_rng (CPU, CUDA bookkeeping, user engines) and the /extra registry.
#include "ckpt/torch/rng_state.h"

#include <random>

#include "ckpt/torch/extra_state.h"
#include "ckpt/torch/tensor_convert.h"
#include "torch_catch.h"

using namespace ckpt;
using namespace ckpt::torch_adapter;

TEST_CASE("CPU generator round trip", "[torch]") {
  torch::manual_seed(123);
  torch::randn({7});  // leaves a cached normal sample in the generator state
  GeneratorRegistry none;
  Node node;
  REQUIRE(capture_rng(none, &node).is_ok());
  const Tensor* state = node.children.at("cpu").find_tensor("state");
  REQUIRE(state != nullptr);
  CHECK(state->dtype == DType::kUInt8);
  CHECK(state->shape == std::vector<int64_t>{5056});
  CHECK(node.get_bool("cuda_available") == torch::cuda::is_available());
  CHECK(node.get_int("cuda_device_count") ==
        (torch::cuda::is_available() ? static_cast<int64_t>(torch::cuda::device_count()) : 0));

  at::Tensor a = torch::rand({16});
  at::Tensor b = torch::randn({5});
  // Not restoring: the generator has moved on.
  at::Tensor a_next = torch::rand({16});
  CHECK_FALSE(torch::equal(a, a_next));

  REQUIRE(restore_rng(node, none).is_ok());
  CHECK(torch::equal(torch::rand({16}), a));
  CHECK(torch::equal(torch::randn({5}), b));
}

TEST_CASE("CUDA states from a bigger machine need an explicit skip", "[torch]") {
  GeneratorRegistry none;
  Node node;
  REQUIRE(capture_rng(none, &node).is_ok());
  const int64_t here = node.get_int("cuda_device_count");
  node.attrs["cuda_available"] = true;
  node.attrs["cuda_device_count"] = here + 1;
  node.child("cuda").tensors[std::to_string(here)] =
      Tensor::copy_of(DType::kUInt8, {16}, std::vector<uint8_t>(16).data(), 16);
  Status s = restore_rng(node, none);
  CHECK(s.code() == Code::kMismatch);
  CHECK_THAT(s.message(), Catch::Contains(std::to_string(here + 1) + " device(s)") &&
                              Catch::Contains("skip_missing_cuda"));
  RngRestoreOptions skip;
  skip.skip_missing_cuda = true;
  CHECK(restore_rng(node, none, skip).is_ok());
}

TEST_CASE("a bad CPU state is refused before anything is set", "[torch]") {
  GeneratorRegistry none;
  Node node;
  REQUIRE(capture_rng(none, &node).is_ok());
  node.children["cpu"].tensors["state"] =
      Tensor::copy_of(DType::kUInt8, {100}, std::vector<uint8_t>(100).data(), 100);
  Status s = restore_rng(node, none);
  CHECK(s.code() == Code::kMismatch);
  CHECK_THAT(s.message(), Catch::Contains("rng/cpu/state") && Catch::Contains("expected 5056") &&
                              Catch::Contains("got 100"));
}

TEST_CASE("user mt19937 and mt19937_64 engines round trip", "[torch]") {
  std::mt19937_64 g64(42);
  std::mt19937 g32(7);
  g64.discard(10);
  GeneratorRegistry reg;
  reg.add("shuffle", &g64);
  reg.add("augment", &g32);
  Node node;
  REQUIRE(capture_rng(reg, &node).is_ok());
  CHECK(node.children.at("user").children.at("shuffle").get_string("engine") == "mt19937_64");
  CHECK(node.children.at("user").children.at("augment").get_string("engine") == "mt19937");

  std::vector<uint64_t> expect64 = {g64(), g64(), g64()};
  std::vector<std::mt19937::result_type> expect32 = {g32(), g32()};
  CHECK(g64() != expect64[0]);  // moved on

  REQUIRE(restore_rng(node, reg).is_ok());
  CHECK(std::vector<uint64_t>{g64(), g64(), g64()} == expect64);
  CHECK(std::vector<std::mt19937::result_type>{g32(), g32()} == expect32);

  SECTION("an unregistered checkpoint engine is an error") {
    GeneratorRegistry partial;
    partial.add("shuffle", &g64);
    Status s = restore_rng(node, partial);
    CHECK(s.code() == Code::kMismatch);
    CHECK_THAT(s.message(), Catch::Contains("augment"));
  }
  SECTION("an engine of the other kind is an error") {
    std::mt19937 wrong;
    GeneratorRegistry swapped;
    swapped.add("shuffle", &wrong);
    swapped.add("augment", &g32);
    Status s = restore_rng(node, swapped);
    CHECK(s.code() == Code::kMismatch);
    CHECK_THAT(s.message(), Catch::Contains("expected mt19937, got \"mt19937_64\""));
  }
  SECTION("a garbled state is corrupt") {
    node.children["user"].children["augment"].attrs["state"] = std::string("12 x");
    Status s = restore_rng(node, reg);
    CHECK(s.code() == Code::kCorrupt);
    CHECK_THAT(s.message(), Catch::Contains("rng/user/augment"));
  }
}

TEST_CASE("extra values round trip", "[torch]") {
  at::Tensor ema = torch::arange(6, torch::kFloat32);
  at::Tensor fresh;  // undefined: restore allocates it
  double best = 0.25;
  int64_t epoch = 3;
  std::string tag = "run-a";
  ExtraRegistry reg;
  reg.add("ema", &ema);
  reg.add("late", &fresh);
  fresh = torch::ones({2}, torch::kInt64);
  reg.add("best_loss", &best);
  reg.add("epoch", &epoch);
  reg.add("tag", &tag);
  Node node;
  REQUIRE(capture_extra(reg, &node).is_ok());
  CHECK(node.tensors.size() == 2);
  CHECK(node.get_double("best_loss") == 0.25);

  // capture borrows the tensors: clone what training will overwrite before restoring.
  node.tensors["ema"] = Tensor::copy_of(DType::kFloat32, {6}, ema.data_ptr(), 24);
  ema.zero_();
  fresh = at::Tensor();
  best = 9;
  epoch = 0;
  tag = "x";
  REQUIRE(restore_extra(node, reg).is_ok());
  CHECK(torch::equal(ema, torch::arange(6, torch::kFloat32)));
  CHECK(torch::equal(fresh, torch::ones({2}, torch::kInt64)));
  CHECK(best == 0.25);
  CHECK(epoch == 3);
  CHECK(tag == "run-a");

  node.attrs["epoch"] = 3.0;
  Status s = restore_extra(node, reg);
  CHECK(s.code() == Code::kMismatch);
  CHECK_THAT(s.message(), Catch::Contains("epoch"));
}

TEST_CASE("CUDA generators and device tensors round trip", "[torch][cuda]") {
  if (!torch::cuda::is_available()) {
    WARN("no CUDA device: CUDA round trip skipped");
    return;
  }
  auto opts = torch::TensorOptions().device(torch::kCUDA, 0);
  torch::manual_seed(5);
  GeneratorRegistry none;
  Node node;
  REQUIRE(capture_rng(none, &node).is_ok());
  CHECK(node.get_bool("cuda_available"));
  REQUIRE(node.children.at("cuda").find_tensor("0") != nullptr);
  at::Tensor a = torch::rand({64}, opts);
  REQUIRE(restore_rng(node, none).is_ok());
  CHECK(torch::equal(torch::rand({64}, opts), a));

  // A device tensor is captured as CPU bytes and restored in place on the device.
  at::Tensor dev = torch::arange(10, opts.dtype(torch::kFloat32));
  Result<Tensor> ct = to_ckpt_tensor(dev);
  REQUIRE(ct.is_ok());
  at::Tensor dst = torch::zeros({10}, opts);
  REQUIRE(copy_into(*ct, dst, "dev").is_ok());
  CHECK(torch::equal(dst.cpu(), torch::arange(10, torch::kFloat32)));
}
