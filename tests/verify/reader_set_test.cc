// The explicit reader set (verify/formats/format_reader.h): the program's readers and nothing
// else, the most confident probe wins (the first added on a tie), and the Env the caller passes is
// the one every probe and read goes through. And AnyDType (ckpt/format/any_dtype.h), the dtype
// currency of the readers: ours by value, a foreign dtype by its name, one decoder.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <memory>
#include <string>

#include "ckpt/format/any_dtype.h"
#include "ckpt/io/env_wrapper.h"
#include "tests/common/test_readers.h"
#include "verify/formats/format_reader.h"

using namespace ckpt;
using namespace ckpt::verify;

namespace {

const std::string kTorchFile =
    std::string(CKPT_SOURCE_DIR) + "/fixtures/foreign/torch2/complete.pt";

// Claims every path with a fixed score and remembers the Env it was handed.
class FixedReader final : public FormatReader {
 public:
  FixedReader(CheckpointFormat format, int score, Env** seen)
      : format_(format), score_(score), seen_(seen) {}
  CheckpointFormat format() const override { return format_; }
  int probe(Env* env, const std::string&) const override {
    *seen_ = env;
    return score_;
  }
  Result<CheckpointView> read(Env* env, const std::string& path,
                              const ReadOptions&) const override {
    *seen_ = env;
    CheckpointView v;
    v.path = path;
    v.format = format_;
    return v;
  }

 private:
  CheckpointFormat format_;
  int score_;
  Env** seen_;
};

}  // namespace

TEST_CASE("a reader set reads with its best probe, through the Env it is given", "[verify]") {
  Env* seen = nullptr;
  ReaderSet set;
  set.add(std::make_unique<FixedReader>(CheckpointFormat::kDcp, 50, &seen))
      .add(std::make_unique<FixedReader>(CheckpointFormat::kDeepSpeed, 70, &seen))
      .add(std::make_unique<FixedReader>(CheckpointFormat::kMegatron, 70, &seen));
  EnvWrapper env(Env::posix());
  REQUIRE(set.best(&env, kTorchFile) != nullptr);
  CHECK(set.best(&env, kTorchFile)->format() == CheckpointFormat::kDeepSpeed);  // tie: first
  auto v = set.read(&env, kTorchFile, {});
  REQUIRE(v.is_ok());
  CHECK(v->format == CheckpointFormat::kDeepSpeed);
  CHECK(seen == &env);
}

TEST_CASE("a reader set holds only the readers its program added", "[verify]") {
  const ReaderSet none;
  auto r = none.read(Env::posix(), kTorchFile, {});
  REQUIRE_FALSE(r.is_ok());
  CHECK(r.status().code() == Code::kCorrupt);
  CHECK(r.status().message().find("not a checkpoint") != std::string::npos);
  auto torch = test::foreign_readers().read(Env::posix(), kTorchFile, {});
  REQUIRE(torch.is_ok());
  CHECK(std::string(format_name(torch->format)) == "torch.save");
  auto gone = none.read(Env::posix(), kTorchFile + ".missing", {});
  CHECK(gone.status().code() == Code::kNotFound);
}

TEST_CASE("AnyDType keeps ours by value and a foreign dtype by its name", "[verify]") {
  CHECK(AnyDType::from_name("bfloat16") == AnyDType(DType::kBFloat16));
  CHECK(AnyDType::from_name("bfloat16").is(DType::kBFloat16));
  CHECK(AnyDType::from_name("bfloat16").name() == "bfloat16");
  const AnyDType e8 = AnyDType::from_name("float8_e8m0fnu");
  CHECK_FALSE(e8.known());
  CHECK(e8.name() == "float8_e8m0fnu");
  CHECK(e8 != AnyDType::other("numpy <u4"));
  CHECK(AnyDType::other("float32") != AnyDType(DType::kFloat32));  // a name is not a dtype
  CHECK(AnyDType().name().empty());
}

TEST_CASE("dtype_element and count_nonfinite decode every numeric dtype", "[verify]") {
  auto at = [](DType t, uint64_t bits) {
    unsigned char b[8];
    std::memcpy(b, &bits, 8);
    return dtype_element(t, b);
  };
  CHECK(*at(DType::kFloat16, 0x3c00) == 1.0);
  CHECK(*at(DType::kFloat16, 0xc000) == -2.0);
  CHECK(*at(DType::kFloat16, 0x0001) == std::ldexp(1.0, -24));  // subnormal
  CHECK(std::isinf(*at(DType::kFloat16, 0x7c00)));
  CHECK(std::isnan(*at(DType::kFloat16, 0x7e00)));
  CHECK(*at(DType::kBFloat16, 0x3f80) == 1.0);
  CHECK(*at(DType::kInt8, 0xff) == -1.0);
  CHECK(*at(DType::kUInt8, 0xff) == 255.0);
  CHECK(*at(DType::kInt64, static_cast<uint64_t>(-7)) == -7.0);
  CHECK_FALSE(at(DType::kComplex64, 0));
  const uint16_t halves[] = {0x3c00, 0x7c00, 0xfe00, 0x0000};  // 1, +Inf, NaN, 0
  CHECK(count_nonfinite(DType::kFloat16, halves, sizeof halves) == 2);
  const float floats[] = {1.0f, NAN, INFINITY};
  CHECK(count_nonfinite(DType::kFloat32, floats, sizeof floats) == 2);
  CHECK(count_nonfinite(DType::kInt32, floats, sizeof floats) == 0);
}
