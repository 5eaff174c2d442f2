// Beside DType (ckpt/format/dtype.h, the one table of element names and sizes): how one element
// reads as a number, and AnyDType, the dtype of a tensor in a checkpoint we did not write — one of
// format v1's DTypes, or another kept by its name. verify/ (the auditor and convert) speaks these;
// it holds no dtype names, sizes or decoders of its own. Pure: no torch, no HDF5.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "ckpt/format/dtype.h"

namespace ckpt {

// One element at `p` (dtype_size(t) bytes, little-endian) as a double: bool, the integers,
// float16, bfloat16, float32 and float64; nullopt for complex, quantized, float8 and packed types.
std::optional<double> dtype_element(DType t, const void* p);

// The NaN and Inf elements among the `n` bytes at `data` (whole elements only) of a float16,
// bfloat16, float32 or float64 tensor; 0 for every other type.
uint64_t count_nonfinite(DType t, const void* data, size_t n);

// A dtype as a checkpoint names it: one of format v1's, or other (its name kept verbatim:
// "float8_e8m0fnu", safetensors' "float4_e2m1", numpy's "numpy <u4"; "" when the file does not
// say). The auditor's currency: compare with is() / ==, print with name() (exactly what the file
// said), size and decode through known().
class AnyDType {
 public:
  AnyDType() = default;                                // other, unnamed: the format did not say
  AnyDType(DType t) : known_(t) {}                     // NOLINT: implicit by design, a DType is one
  static AnyDType from_name(const std::string& name);  // ours when dtype_from_name knows it
  static AnyDType other(std::string name);             // never one of ours, whatever the name

  const std::optional<DType>& known() const { return known_; }
  bool is(DType t) const { return known_ == t; }
  std::string name() const { return known_ ? std::string(dtype_name(*known_)) : other_; }

  bool operator==(const AnyDType& o) const { return known_ == o.known_ && other_ == o.other_; }
  bool operator!=(const AnyDType& o) const { return !(*this == o); }

 private:
  std::optional<DType> known_;
  std::string other_;
};

}  // namespace ckpt
