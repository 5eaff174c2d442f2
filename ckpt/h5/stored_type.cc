#include "ckpt/h5/stored_type.h"

namespace ckpt::h5 {
namespace {

StoredType fixed(size_t size, bool is_signed) {
  StoredType s;
  s.size = size;
  s.is_signed = is_signed;
  return s;
}

StoredType floating(StoredType::Kind kind, size_t size, unsigned exp_loc, unsigned exp_size,
                    unsigned mant_size, unsigned bias) {
  StoredType s;
  s.kind = kind;
  s.size = size;
  s.exp_loc = exp_loc, s.exp_size = exp_size, s.mant_size = mant_size, s.bias = bias;
  return s;
}

}  // namespace

StoredType stored_type(DType t) {
  using K = StoredType::Kind;
  switch (t) {
    case DType::kBool:
    case DType::kUInt8:
    case DType::kQUInt8:
      return fixed(1, false);
    case DType::kInt8:
    case DType::kQInt8:
      return fixed(1, true);
    case DType::kInt16:
      return fixed(2, true);
    case DType::kInt32:
    case DType::kQInt32:
      return fixed(4, true);
    case DType::kInt64:
      return fixed(8, true);
    case DType::kUInt16:
      return fixed(2, false);
    case DType::kUInt32:
      return fixed(4, false);
    case DType::kUInt64:
      return fixed(8, false);
    case DType::kFloat32:
      return floating(K::kFloat, 4, 23, 8, 23, 127);
    case DType::kFloat64:
      return floating(K::kFloat, 8, 52, 11, 52, 1023);
    case DType::kFloat16:
      return floating(K::kFloat, 2, 10, 5, 10, 15);
    case DType::kBFloat16:
      return floating(K::kFloat, 2, 7, 8, 7, 127);
    case DType::kComplex32:
      return floating(K::kComplex, 2, 10, 5, 10, 15);
    case DType::kComplex64:
      return floating(K::kComplex, 4, 23, 8, 23, 127);
    case DType::kComplex128:
      return floating(K::kComplex, 8, 52, 11, 52, 1023);
    case DType::kQUInt4x2:
    case DType::kFloat8E5M2:
    case DType::kFloat8E4M3FN: {
      StoredType s;
      s.kind = K::kOpaque;
      return s;
    }
  }
  return StoredType{};
}

}  // namespace ckpt::h5
