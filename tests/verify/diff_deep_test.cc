// `ckpt diff --deep` on views built in memory: value changes with their exact max |a - b|, per
// dtype, tensors compared by dtype and shape only when a side has no bytes, and statuses that
// differ only because a format cannot tell (notes, not differences).
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "ckpt/io/env.h"
#include "verify/audit/diff.h"
#include "verify/formats/builtin_readers.h"

namespace {

using namespace ckpt;
using namespace ckpt::verify;

template <typename T>
std::string bytes_of(const std::vector<T>& v) {
  std::string s(v.size() * sizeof(T), '\0');
  std::memcpy(&s[0], v.data(), s.size());
  return s;
}

TensorInfo tensor(const std::string& name, const std::string& dtype, std::vector<int64_t> shape,
                  std::shared_ptr<const std::string> values) {
  TensorInfo t;
  t.name = name;
  t.dtype = AnyDType::from_name(dtype);
  t.shape = std::move(shape);
  t.values = std::move(values);
  return t;
}

CheckpointView model_view(std::vector<TensorInfo> tensors) {
  CheckpointView v;
  v.path = "x";
  v.format = CheckpointFormat::kTorchSave;
  v.model.found = true;
  v.model.tensors = std::move(tensors);
  return v;
}

TEST_CASE("max_abs_difference reads each dtype as numbers", "[verify]") {
  CHECK(*max_abs_difference(DType::kFloat32, bytes_of<float>({1, 2, 3}),
                            bytes_of<float>({1, 2.5f, 2})) == 1.0);
  CHECK(*max_abs_difference(DType::kFloat64, bytes_of<double>({1e-9, 0}),
                            bytes_of<double>({0, 0})) == 1e-9);
  CHECK(*max_abs_difference(DType::kInt64, bytes_of<int64_t>({5, -7}), bytes_of<int64_t>({5, 7})) ==
        14);
  // bfloat16 1.0 = 0x3f80, 2.0 = 0x4000; float16 1.0 = 0x3c00, 0.5 = 0x3800.
  CHECK(*max_abs_difference(DType::kBFloat16, bytes_of<uint16_t>({0x3f80}),
                            bytes_of<uint16_t>({0x4000})) == 1.0);
  CHECK(*max_abs_difference(DType::kFloat16, bytes_of<uint16_t>({0x3c00}),
                            bytes_of<uint16_t>({0x3800})) == 0.5);
  const float nan = std::nanf("");
  CHECK(std::isnan(
      *max_abs_difference(DType::kFloat32, bytes_of<float>({1, nan}), bytes_of<float>({1, 2}))));
  CHECK(*max_abs_difference(DType::kFloat32, bytes_of<float>({nan, INFINITY}),
                            bytes_of<float>({nan, INFINITY})) == 0);
  CHECK_FALSE(max_abs_difference(DType::kComplex64, std::string(8, '\0'), std::string(8, '\1')));
  CHECK_FALSE(max_abs_difference(DType::kFloat32, std::string(8, '\0'), std::string(4, '\0')));
}

TEST_CASE("diff_views lists a value change only when both sides have the bytes", "[verify]") {
  auto w_a = std::make_shared<const std::string>(bytes_of<float>({0.25f, -1.0f}));
  auto w_b = std::make_shared<const std::string>(bytes_of<float>({0.25f, -1.75f}));
  auto same = std::make_shared<const std::string>(bytes_of<float>({3, 4}));
  CheckpointView a =
      model_view({tensor("w", "float32", {2}, w_a), tensor("b", "float32", {2}, same),
                  tensor("c", "float32", {2}, nullptr)});
  CheckpointView b =
      model_view({tensor("w", "float32", {2}, w_b), tensor("b", "float32", {2}, same),
                  tensor("c", "float32", {2}, same)});
  const CheckpointDiff d = diff_views(a, b);
  CHECK(d.deep);
  REQUIRE(d.changed.size() == 1);
  CHECK(d.changed[0].name == "w");
  CHECK(d.changed[0].a == "float32 [2]");
  CHECK(d.changed[0].b == "float32 [2]");
  REQUIRE(d.changed[0].max_abs_diff);
  CHECK(*d.changed[0].max_abs_diff == 0.75);
  CHECK(d.tensors_same == 2);
  CHECK(d.tensors_by_value == 1);  // b
  CHECK(d.tensors_unread == 1);    // c: no bytes on side A
  const auto j = diff_to_json(d);
  CHECK(j["tensors"]["changed"][0]["max_abs_diff"] == 0.75);
  const std::string text = diff_to_text(d);
  CHECK(text.find("tensor w values") != std::string::npos);
  CHECK(text.find("max |a-b| 0.75") != std::string::npos);
  CHECK(text.find("2 model tensors (1 equal by value, 1 by dtype and shape only") !=
        std::string::npos);

  // Without bytes on either side (no --deep), nothing is compared by value.
  a.model.tensors[0].values = nullptr;
  b.model.tensors[0].values = nullptr;
  for (auto* v : {&a, &b})
    for (auto& t : v->model.tensors) t.values = nullptr;
  const CheckpointDiff shallow = diff_views(a, b);
  CHECK_FALSE(shallow.deep);
  CHECK(shallow.changed.empty());
  CHECK(diff_to_json(shallow)["tensors"]["changed"].empty());
}

TEST_CASE("missing where a format cannot tell vs not_applicable is a note, not a difference",
          "[verify]") {
  // DCP records no devices, so rng_cuda is missing there; a CPU torch.save says not_applicable.
  auto w = std::make_shared<const std::string>(bytes_of<float>({1, 2}));
  CheckpointView dcp = model_view({tensor("w", "float32", {2}, w)});
  dcp.format = CheckpointFormat::kDcp;
  dcp.devices_known = false;
  CheckpointView pt = model_view({tensor("w", "float32", {2}, w)});
  pt.devices_known = true;
  pt.devices = {"cpu"};
  const CheckpointDiff d = diff_views(dcp, pt);
  CHECK(d.differences == 0);
  const auto rng = std::find_if(d.components.begin(), d.components.end(), [](const auto& c) {
    return c.component == AuditComponent::kRngCuda;
  });
  REQUIRE(rng != d.components.end());
  CHECK(rng->a == ComponentStatus::kMissing);
  CHECK(rng->b == ComponentStatus::kNotApplicable);
  CHECK(rng->note ==
        "rng_cuda missing in A, not_applicable in B: not counted, dcp (A) records "
        "no devices");
  const std::string text = diff_to_text(d);
  INFO(text);
  CHECK(text.find("no differences") != std::string::npos);
  CHECK(text.find("note: rng_cuda missing in A") != std::string::npos);
  const auto j = diff_to_json(d);
  CHECK(j["differences"] == 0);
  CHECK(j["components"]["rng_cuda"]["a"] == "missing");
  REQUIRE(j["notes"].size() == 1);
  CHECK(diff_views(pt, dcp).differences == 0);  // either side

  // The same pair where the missing side records devices (CUDA tensors, no CUDA generator
  // state) is a difference in state: counted.
  CheckpointView cuda = pt;
  cuda.devices = {"cuda:0"};
  const CheckpointDiff real = diff_views(cuda, pt);
  CHECK(real.differences == 1);
  CHECK(real.components[static_cast<size_t>(rng - d.components.begin())].note.empty());
  CHECK(diff_to_json(real)["notes"].empty());
}

TEST_CASE("a DeepSpeed scheduler's kind holds no count: two steps of one run differ in counters",
          "[verify]") {
  // DeepSpeed's WarmupLR saves {"last_batch_iteration": N}; the count was part of the kind, so
  // `ckpt diff` of consecutive checkpoints listed it as a changed hyperparameter.
  const std::string dir = std::string(CKPT_SOURCE_DIR) + "/fixtures/foreign/deepspeed/zero1";
  auto v = builtin_readers().read(Env::posix(), dir + "/global_step3", {});
  REQUIRE(v.is_ok());
  CHECK(v->scheduler.kind == "DeepSpeed scheduler");
  CHECK(v->scheduler.evidence.find("(last_batch_iteration 2)") != std::string::npos);
  CheckpointView later = *v;
  later.scheduler.last_epoch = *v->scheduler.last_epoch + 3;
  const CheckpointDiff d = diff_views(*v, later);
  for (const auto& h : d.hyperparameters) CHECK(h.key != "scheduler.kind");
}

}  // namespace
