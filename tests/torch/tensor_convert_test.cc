// to_ckpt_tensor / to_torch / copy_into: every dtype bit-exact, layouts, errors.
#include "ckpt/torch/tensor_convert.h"

#include <cstring>

#include "ckpt/torch/compat.h"
#include "ckpt/torch/version.h"
#include "torch_catch.h"

using namespace ckpt;
using namespace ckpt::torch_adapter;

namespace {

std::vector<c10::ScalarType> all_scalar_types() {
  std::vector<c10::ScalarType> v = {
      at::kBool,        at::kByte,         at::kChar,          at::kShort, at::kInt,
      at::kLong,        at::kHalf,         at::kBFloat16,      at::kFloat, at::kDouble,
      at::kComplexHalf, at::kComplexFloat, at::kComplexDouble, at::kQInt8, at::kQUInt8,
      at::kQInt32,      at::kQUInt4x2};
#if CKPT_TORCH_HAS_FLOAT8
  v.push_back(at::kFloat8_e5m2);
  v.push_back(at::kFloat8_e4m3fn);
#endif
#if CKPT_TORCH_HAS_UINT_WIDE
  v.push_back(at::kUInt16);
  v.push_back(at::kUInt32);
  v.push_back(at::kUInt64);
#endif
  return v;
}

// A [2, 3] tensor of `st` whose raw bytes are a known, dtype-independent pattern.
at::Tensor patterned(c10::ScalarType st) {
  at::TensorOptions o = at::TensorOptions().dtype(st);
  at::Tensor t =
      c10::isQIntType(st) ? at::_empty_affine_quantized({2, 3}, o, 1.0, 0) : at::empty({2, 3}, o);
  auto* p = static_cast<uint8_t*>(t.data_ptr());
  size_t n = st == at::kQUInt4x2 ? 4 : t.numel() * t.element_size();
  for (size_t i = 0; i < n; ++i) p[i] = st == at::kBool ? i % 2 : static_cast<uint8_t>(37 * i + 11);
  return t;
}

bool same_bytes(const Tensor& a, const at::Tensor& b, size_t n) {
  return a.nbytes == n && std::memcmp(a.data, b.data_ptr(), n) == 0;
}

}  // namespace

TEST_CASE("every libtorch dtype round-trips bit-exactly", "[torch]") {
  for (c10::ScalarType st : all_scalar_types()) {
    INFO("dtype " << c10::toString(st));
    at::Tensor t = patterned(st);
    const size_t n = st == at::kQUInt4x2 ? 4 : t.numel() * t.element_size();
    Result<Tensor> ct = to_ckpt_tensor(t);
    REQUIRE(ct.is_ok());
    CHECK(ct->shape == std::vector<int64_t>{2, 3});
    CHECK(same_bytes(*ct, t, n));
    Result<DType> dt = to_ckpt_dtype(st);
    REQUIRE(dt.is_ok());
    CHECK(ct->dtype == *dt);
    Result<c10::ScalarType> back_type = to_torch_dtype(*dt);
    REQUIRE(back_type.is_ok());
    CHECK(*back_type == st);

    Result<at::Tensor> back = to_torch(*ct);
    REQUIRE(back.is_ok());
    CHECK(back->scalar_type() == st);
    CHECK(back->sizes() == t.sizes());
    CHECK(std::memcmp(back->data_ptr(), t.data_ptr(), n) == 0);
  }
}

TEST_CASE("dtypes the format cannot name are refused", "[torch]") {
  Result<DType> r = to_ckpt_dtype(at::kQUInt2x4);
  REQUIRE_FALSE(r.is_ok());
  CHECK(r.status().code() == Code::kUnsupported);
  CHECK_THAT(r.status().message(), Catch::Contains("QUInt2x4"));
}

TEST_CASE("non-contiguous, conjugated, 0-d and empty tensors", "[torch]") {
  SECTION("transposed view is made contiguous") {
    at::Tensor t = torch::arange(12, torch::kFloat32).reshape({3, 4}).t();
    REQUIRE_FALSE(t.is_contiguous());
    Result<Tensor> ct = to_ckpt_tensor(t);
    REQUIRE(ct.is_ok());
    CHECK(ct->shape == std::vector<int64_t>{4, 3});
    at::Tensor expect = t.contiguous();
    CHECK(same_bytes(*ct, expect, 48));
    Result<at::Tensor> back = to_torch(*ct);
    REQUIRE(back.is_ok());
    CHECK(torch::equal(*back, t));
  }
  SECTION("lazy conjugate is resolved") {
    at::Tensor z = torch::complex(torch::ones({3}), torch::full({3}, 2.0)).conj();
    Result<Tensor> ct = to_ckpt_tensor(z);
    REQUIRE(ct.is_ok());
    Result<at::Tensor> back = to_torch(*ct);
    REQUIRE(back.is_ok());
    CHECK(torch::equal(*back, z.resolve_conj()));
    CHECK(torch::imag(*back).lt(0).all().item<bool>());
  }
  SECTION("0-d") {
    at::Tensor t = torch::tensor(3.5, torch::kFloat64);
    Result<Tensor> ct = to_ckpt_tensor(t);
    REQUIRE(ct.is_ok());
    CHECK(ct->shape.empty());
    CHECK(ct->nbytes == 8);
    Result<at::Tensor> back = to_torch(*ct);
    REQUIRE(back.is_ok());
    CHECK(back->dim() == 0);
    CHECK(back->item<double>() == 3.5);
  }
  SECTION("empty") {
    at::Tensor t = torch::zeros({0, 3}, torch::kInt32);
    Result<Tensor> ct = to_ckpt_tensor(t);
    REQUIRE(ct.is_ok());
    CHECK(ct->nbytes == 0);
    CHECK(ct->shape == std::vector<int64_t>{0, 3});
    Result<at::Tensor> back = to_torch(*ct);
    REQUIRE(back.is_ok());
    CHECK(back->sizes() == t.sizes());
    at::Tensor dst = torch::zeros({0, 3}, torch::kInt32);
    CHECK(copy_into(*ct, dst, "empty").is_ok());
  }
}

TEST_CASE("the ckpt tensor keeps its bytes alive", "[torch]") {
  Result<Tensor> ct = [] {
    at::Tensor t = torch::full({1000}, 7.0f);
    return to_ckpt_tensor(t);
  }();
  REQUIRE(ct.is_ok());
  const float* f = static_cast<const float*>(ct->data);
  CHECK(f[0] == 7.0f);
  CHECK(f[999] == 7.0f);
}

TEST_CASE("to_torch and copy_into reject inconsistent input, naming the tensor", "[torch]") {
  Tensor bad = Tensor::copy_of(DType::kFloat32, {2, 2}, "0123456789ab", 12);
  Result<at::Tensor> r = to_torch(bad);
  REQUIRE_FALSE(r.is_ok());
  CHECK(r.status().code() == Code::kCorrupt);
  CHECK_THAT(r.status().message(), Catch::Contains("16") && Catch::Contains("12"));

  Result<Tensor> good = to_ckpt_tensor(torch::ones({2, 2}));
  REQUIRE(good.is_ok());
  at::Tensor wrong_shape = torch::zeros({4});
  Status s = copy_into(*good, wrong_shape, "layer.weight");
  CHECK(s.code() == Code::kMismatch);
  CHECK_THAT(s.message(), Catch::Contains("layer.weight") && Catch::Contains("expected [4]") &&
                              Catch::Contains("got [2, 2]"));
  at::Tensor wrong_dtype = torch::zeros({2, 2}, torch::kFloat64);
  s = copy_into(*good, wrong_dtype, "layer.bias");
  CHECK(s.code() == Code::kMismatch);
  CHECK_THAT(s.message(), Catch::Contains("layer.bias") && Catch::Contains("expected float64") &&
                              Catch::Contains("got float32"));

  at::Tensor ok = torch::zeros({2, 2}, torch::requires_grad());
  REQUIRE(copy_into(*good, ok, "param").is_ok());
  CHECK(torch::equal(ok, torch::ones({2, 2})));
}

TEST_CASE("libtorch_version matches the headers", "[torch]") {
  CHECK(libtorch_version() == std::to_string(TORCH_VERSION_MAJOR) + "." +
                                  std::to_string(TORCH_VERSION_MINOR) + "." +
                                  std::to_string(TORCH_VERSION_PATCH));
}
