#include "ckpt/format/any_dtype.h"

#include <cmath>
#include <cstring>

namespace ckpt {
namespace {

double half_to_double(uint16_t h) {
  const uint32_t sign = (h >> 15) & 1, exp = (h >> 10) & 0x1f, frac = h & 0x3ff;
  const double v = exp == 0    ? std::ldexp(frac, -24)
                   : exp == 31 ? (frac ? std::nan("") : HUGE_VAL)
                               : std::ldexp(frac + 1024, static_cast<int>(exp) - 25);
  return sign ? -v : v;
}

double bfloat16_to_double(uint16_t h) {
  const uint32_t w = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &w, 4);
  return f;
}

}  // namespace

std::optional<double> dtype_element(DType t, const void* p) {
  auto get = [p](auto x) {
    std::memcpy(&x, p, sizeof x);
    return static_cast<double>(x);
  };
  switch (t) {
    case DType::kBool:
    case DType::kUInt8:
      return get(uint8_t{});
    case DType::kInt8:
      return get(int8_t{});
    case DType::kInt16:
      return get(int16_t{});
    case DType::kUInt16:
      return get(uint16_t{});
    case DType::kInt32:
      return get(int32_t{});
    case DType::kUInt32:
      return get(uint32_t{});
    case DType::kInt64:
      return get(int64_t{});
    case DType::kUInt64:
      return get(uint64_t{});
    case DType::kFloat32:
      return get(float{});
    case DType::kFloat64:
      return get(double{});
    case DType::kFloat16: {
      uint16_t h;
      std::memcpy(&h, p, 2);
      return half_to_double(h);
    }
    case DType::kBFloat16: {
      uint16_t h;
      std::memcpy(&h, p, 2);
      return bfloat16_to_double(h);
    }
    default:
      return std::nullopt;
  }
}

uint64_t count_nonfinite(DType t, const void* data, size_t n) {
  const unsigned char* p = static_cast<const unsigned char*>(data);
  uint64_t bad = 0;
  switch (t) {
    case DType::kFloat16:  // exponent all ones: Inf or NaN
      for (size_t k = 0; k + 2 <= n; k += 2) bad += (p[k + 1] & 0x7c) == 0x7c;
      break;
    case DType::kBFloat16:
      for (size_t k = 0; k + 2 <= n; k += 2) bad += (p[k + 1] & 0x7f) == 0x7f && (p[k] & 0x80);
      break;
    case DType::kFloat32:
      for (size_t k = 0; k + 4 <= n; k += 4) {
        float f;
        std::memcpy(&f, p + k, 4);
        bad += !std::isfinite(f);
      }
      break;
    case DType::kFloat64:
      for (size_t k = 0; k + 8 <= n; k += 8) {
        double d;
        std::memcpy(&d, p + k, 8);
        bad += !std::isfinite(d);
      }
      break;
    default:
      break;
  }
  return bad;
}

AnyDType AnyDType::from_name(const std::string& name) {
  if (auto t = dtype_from_name(name)) return *t;
  return other(name);
}

AnyDType AnyDType::other(std::string name) {
  AnyDType d;
  d.other_ = std::move(name);
  return d;
}

}  // namespace ckpt
