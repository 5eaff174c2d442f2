// Conversion between libtorch tensors and ckpt::Tensor (ckpt/format/tree.h), the leaf of every
// tree the adapter builds. Every libtorch dtype that ckpt's format can name is mapped; the ones a
// release lacks (float8, uint16/32/64 before 2.x) are behind the guards in ckpt/torch/compat.h.
//
// Ownership: to_ckpt_tensor() returns a Tensor that *borrows* the bytes of a CPU, contiguous
// tensor and pins that tensor's storage through Tensor::keepalive, so the bytes stay valid for as
// long as the ckpt::Tensor (or a copy of it) lives. They are the live bytes, not a snapshot: an
// in-place update (an optimizer step) before the store has written them changes what is written,
// so the store must run between steps or the caller clones first. to_torch() always
// copies into a fresh CPU tensor the caller owns. Thread-safety: the functions are reentrant;
// the tensors they touch must not be written concurrently.
//
// Quantized dtypes: only the stored integer bytes travel (qint8/quint8/qint32: one element per
// byte group; quint4x2: packed two per byte, ceil(last_dim / 2) bytes per row). Quantization
// parameters (scale, zero point) are not part of ckpt::Tensor; to_torch() gives scale 1, zero 0.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ckpt/base/status.h"
#include "ckpt/format/dtype.h"
#include "ckpt/format/tree.h"
#include "ckpt/torch/fwd.h"

namespace ckpt::torch_adapter {

// The ckpt dtype of a libtorch scalar type; kUnsupported (naming the torch type) for ones the
// format has no name for (e.g. quint2x4).
Result<DType> to_ckpt_dtype(c10::ScalarType t);
// The libtorch scalar type of a ckpt dtype; kUnsupported when this libtorch lacks it.
Result<c10::ScalarType> to_torch_dtype(DType t);

// On success a Tensor describing `t` (made contiguous and copied to CPU first when needed; the
// result keeps that tensor alive). On failure: undefined tensor, unsupported dtype, sparse layout.
Result<Tensor> to_ckpt_tensor(const torch::Tensor& t);

// A new CPU tensor holding a copy of `t`'s bytes. Fails when the dtype is unknown to this
// libtorch, or when nbytes does not match the shape (names the expected and actual sizes).
Result<torch::Tensor> to_torch(const Tensor& t);

// The dtype and shape checks of check_compatible(), for a tensor whose bytes are not read yet.
Status check_dtype_shape(const Tensor& src, const torch::Tensor& dst, const std::string& name);

// The checks copy_into() makes, without copying: `dst` is defined, has `src`'s dtype and shape,
// and `src` holds exactly the bytes that dtype and shape need. Errors name `name`, expected
// (dst) vs actual (src).
Status check_compatible(const Tensor& src, const torch::Tensor& dst, const std::string& name);

// Copies `src` into the existing tensor `dst` in place (any device, under NoGradGuard, so it
// works on parameters that require grad). Checks dtype and shape first; the error names `name`
// and gives expected (dst) vs actual (src).
Status copy_into(const Tensor& src, torch::Tensor& dst, const std::string& name);

// "[2, 3]" — for error messages.
std::string shape_string(const std::vector<int64_t>& shape);

}  // namespace ckpt::torch_adapter
