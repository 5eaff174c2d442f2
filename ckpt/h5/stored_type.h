// How each ckpt dtype is stored in a rank file (docs/format.md §3, the dtype table): one
// description, from which HDF5's writer builds its HDF5 types (types.cc) and ckpt's encoder
// writes its datatype messages (encode.cc). Pure: no HDF5. Internal to ckpt/h5.
#pragma once

#include <cstddef>

#include "ckpt/format/dtype.h"

namespace ckpt::h5 {

struct StoredType {
  enum Kind { kFixed, kFloat, kComplex, kOpaque } kind = kFixed;
  size_t size = 1;         // bytes of one element (of one part, for kComplex)
  bool is_signed = false;  // kFixed
  // kFloat, and each part of kComplex: IEEE-style fields (sign bit at 8 * size - 1, mantissa
  // at bit 0, the leading mantissa bit implied).
  unsigned exp_loc = 0, exp_size = 0, mant_size = 0, bias = 0;
};

// kOpaque types carry dtype_name(t) as their tag.
StoredType stored_type(DType t);

}  // namespace ckpt::h5
