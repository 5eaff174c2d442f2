#include "ckpt/format/dtype.h"

#include <cstring>

namespace ckpt {
namespace {
struct Info {
  DType t;
  const char* name;
  size_t size;
};
constexpr Info kInfo[] = {
    {DType::kBool, "bool", 1},
    {DType::kUInt8, "uint8", 1},
    {DType::kInt8, "int8", 1},
    {DType::kInt16, "int16", 2},
    {DType::kInt32, "int32", 4},
    {DType::kInt64, "int64", 8},
    {DType::kFloat16, "float16", 2},
    {DType::kBFloat16, "bfloat16", 2},
    {DType::kFloat32, "float32", 4},
    {DType::kFloat64, "float64", 8},
    {DType::kComplex32, "complex32", 4},
    {DType::kComplex64, "complex64", 8},
    {DType::kComplex128, "complex128", 16},
    {DType::kQInt8, "qint8", 1},
    {DType::kQUInt8, "quint8", 1},
    {DType::kQInt32, "qint32", 4},
    {DType::kQUInt4x2, "quint4x2", 1},
    {DType::kFloat8E5M2, "float8_e5m2", 1},
    {DType::kFloat8E4M3FN, "float8_e4m3fn", 1},
    {DType::kUInt16, "uint16", 2},
    {DType::kUInt32, "uint32", 4},
    {DType::kUInt64, "uint64", 8},
};
const Info& info(DType t) { return kInfo[static_cast<size_t>(t)]; }
}  // namespace

const char* dtype_name(DType t) { return info(t).name; }
size_t dtype_size(DType t) { return info(t).size; }

std::optional<DType> dtype_from_name(const std::string& name) {
  for (const Info& i : kInfo) {
    if (name == i.name) return i.t;
  }
  return std::nullopt;
}

std::vector<DType> all_dtypes() {
  std::vector<DType> out;
  for (const Info& i : kInfo) out.push_back(i.t);
  return out;
}

bool dtype_is_quantized(DType t) {
  return t == DType::kQInt8 || t == DType::kQUInt8 || t == DType::kQInt32 || t == DType::kQUInt4x2;
}

bool dtype_is_floating(DType t) {
  switch (t) {
    case DType::kFloat16:
    case DType::kBFloat16:
    case DType::kFloat32:
    case DType::kFloat64:
    case DType::kFloat8E5M2:
    case DType::kFloat8E4M3FN:
      return true;
    default:
      return false;
  }
}

}  // namespace ckpt
