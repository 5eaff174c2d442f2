// Element types of format v1. Names are the on-disk spelling (the `dtype` attribute of every
// tensor dataset); every libtorch dtype has one. Pure: no torch, no HDF5.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace ckpt {

enum class DType : uint8_t {
  kBool,
  kUInt8,
  kInt8,
  kInt16,
  kInt32,
  kInt64,
  kFloat16,
  kBFloat16,
  kFloat32,
  kFloat64,
  kComplex32,
  kComplex64,
  kComplex128,
  kQInt8,
  kQUInt8,
  kQInt32,
  kQUInt4x2,
  kFloat8E5M2,
  kFloat8E4M3FN,
  kUInt16,
  kUInt32,
  kUInt64,
};

// "float32", "bfloat16", "int64", ...
const char* dtype_name(DType t);
std::optional<DType> dtype_from_name(const std::string& name);
size_t dtype_size(DType t);
bool dtype_is_floating(DType t);  // float16, bfloat16, float32, float64, float8*
// qint8, quint8, qint32, quint4x2: their bytes mean nothing without a scale and zero point.
bool dtype_is_quantized(DType t);
// Every DType, in declaration order.
std::vector<DType> all_dtypes();

}  // namespace ckpt
