#include "ckpt/torch/tensor_convert.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <c10/util/Exception.h>

#include <cstring>
#include <limits>
#include <optional>
#include <sstream>

#include "ckpt/torch/compat.h"

namespace ckpt::torch_adapter {
namespace {

struct DTypePair {
  c10::ScalarType torch;
  DType ckpt;
};

// Every pair both sides can name; the guarded ones exist only in newer libtorch releases.
constexpr DTypePair kPairs[] = {
    {c10::ScalarType::Bool, DType::kBool},
    {c10::ScalarType::Byte, DType::kUInt8},
    {c10::ScalarType::Char, DType::kInt8},
    {c10::ScalarType::Short, DType::kInt16},
    {c10::ScalarType::Int, DType::kInt32},
    {c10::ScalarType::Long, DType::kInt64},
    {c10::ScalarType::Half, DType::kFloat16},
    {c10::ScalarType::BFloat16, DType::kBFloat16},
    {c10::ScalarType::Float, DType::kFloat32},
    {c10::ScalarType::Double, DType::kFloat64},
    {c10::ScalarType::ComplexHalf, DType::kComplex32},
    {c10::ScalarType::ComplexFloat, DType::kComplex64},
    {c10::ScalarType::ComplexDouble, DType::kComplex128},
    {c10::ScalarType::QInt8, DType::kQInt8},
    {c10::ScalarType::QUInt8, DType::kQUInt8},
    {c10::ScalarType::QInt32, DType::kQInt32},
    {c10::ScalarType::QUInt4x2, DType::kQUInt4x2},
#if CKPT_TORCH_HAS_FLOAT8
    {c10::ScalarType::Float8_e5m2, DType::kFloat8E5M2},
    {c10::ScalarType::Float8_e4m3fn, DType::kFloat8E4M3FN},
#endif
#if CKPT_TORCH_HAS_UINT_WIDE
    {c10::ScalarType::UInt16, DType::kUInt16},
    {c10::ScalarType::UInt32, DType::kUInt32},
    {c10::ScalarType::UInt64, DType::kUInt64},
#endif
};

// Bytes a dense tensor of this dtype and shape occupies, or nullopt on a negative dimension or
// overflow. quint4x2 packs two values per byte along the last dimension, row by row (libtorch's
// sub-byte layout), so it is ceil(last / 2) bytes per row.
std::optional<size_t> dense_nbytes(DType dt, const std::vector<int64_t>& shape) {
  const bool packed = dt == DType::kQUInt4x2;
  size_t n = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    int64_t d = shape[i];
    if (d < 0) return std::nullopt;
    if (packed && i + 1 == shape.size()) d = (d + 1) / 2;
    if (d != 0 && n > std::numeric_limits<size_t>::max() / static_cast<size_t>(d)) {
      return std::nullopt;
    }
    n *= static_cast<size_t>(d);
  }
  size_t elem = packed ? 1 : dtype_size(dt);
  if (n > std::numeric_limits<size_t>::max() / elem) return std::nullopt;
  return n * elem;
}

}  // namespace

std::string shape_string(const std::vector<int64_t>& shape) {
  std::ostringstream os;
  os << '[';
  for (size_t i = 0; i < shape.size(); ++i) os << (i ? ", " : "") << shape[i];
  os << ']';
  return os.str();
}

Result<DType> to_ckpt_dtype(c10::ScalarType t) {
  for (const DTypePair& p : kPairs) {
    if (p.torch == t) return p.ckpt;
  }
  return unsupported(std::string("libtorch dtype ") + c10::toString(t) +
                     " has no ckpt format name");
}

Result<c10::ScalarType> to_torch_dtype(DType t) {
  for (const DTypePair& p : kPairs) {
    if (p.ckpt == t) return p.torch;
  }
  return unsupported(std::string("dtype ") + dtype_name(t) + " does not exist in libtorch " +
                     TORCH_VERSION);
}

Result<Tensor> to_ckpt_tensor(const torch::Tensor& t) {
  if (!t.defined()) return invalid_argument("cannot capture an undefined tensor");
  if (t.layout() != c10::kStrided) {
    std::ostringstream os;
    os << "cannot capture a tensor with layout " << t.layout() << " (only dense tensors)";
    return unsupported(os.str());
  }
  CKPT_ASSIGN_OR_RETURN(DType dt, to_ckpt_dtype(t.scalar_type()));
  try {
    // detach() shares the storage but drops autograd history, so keepalive pins bytes only.
    at::Tensor c = t.detach();
    if (!c.device().is_cpu()) c = c.to(at::kCPU);
    // Lazy conjugate/negative views report contiguous but hold unconjugated bytes.
    if (c.is_conj()) c = c.resolve_conj();
    if (c.is_neg()) c = c.resolve_neg();
    if (!c.is_contiguous()) c = c.contiguous();
    std::optional<size_t> nbytes = dense_nbytes(dt, c.sizes().vec());
    if (!nbytes) return internal_error("tensor size overflows size_t");
    if (dt == DType::kQUInt4x2 && (c.storage_offset() != 0 || c.storage().nbytes() < *nbytes)) {
      return unsupported("quint4x2 tensor is a view into packed storage; capture its base tensor");
    }
    Tensor out;
    out.dtype = dt;
    out.shape = c.sizes().vec();
    out.nbytes = *nbytes;
    if (*nbytes != 0) {
      auto holder = std::make_shared<at::Tensor>(c);
      out.data = holder->data_ptr();
      out.keepalive = std::shared_ptr<const void>(holder, out.data);
    }
    return out;
  } catch (const c10::Error& e) {
    return internal_error(std::string("libtorch failed while capturing a tensor: ") +
                          e.what_without_backtrace());
  }
}

Result<torch::Tensor> to_torch(const Tensor& t) {
  CKPT_ASSIGN_OR_RETURN(c10::ScalarType st, to_torch_dtype(t.dtype));
  std::optional<size_t> expected = dense_nbytes(t.dtype, t.shape);
  if (!expected) {
    return corrupt("invalid shape " + shape_string(t.shape) + " for dtype " + dtype_name(t.dtype));
  }
  if (t.nbytes != *expected) {
    return corrupt("tensor of " + std::string(dtype_name(t.dtype)) + " " + shape_string(t.shape) +
                   " should hold " + std::to_string(*expected) + " bytes, got " +
                   std::to_string(t.nbytes));
  }
  if (t.nbytes != 0 && t.data == nullptr) {
    return corrupt("tensor of " + std::to_string(t.nbytes) + " bytes has no data");
  }
  try {
    at::TensorOptions opts = at::TensorOptions().dtype(st).device(at::kCPU);
    at::Tensor out = dtype_is_quantized(t.dtype)
                         ? at::_empty_affine_quantized(t.shape, opts, 1.0, 0)
                         : at::empty(t.shape, opts);
    if (t.nbytes != 0) std::memcpy(out.data_ptr(), t.data, t.nbytes);
    return out;
  } catch (const c10::Error& e) {
    return internal_error(std::string("libtorch failed to allocate a ") + dtype_name(t.dtype) +
                          " " + shape_string(t.shape) + " tensor: " + e.what_without_backtrace());
  }
}

Status check_dtype_shape(const Tensor& src, const torch::Tensor& dst, const std::string& name) {
  const std::string what = "tensor \"" + name + "\"";
  if (!dst.defined()) return invalid_argument(what + ": destination is undefined");
  Result<DType> dst_dtype = to_ckpt_dtype(dst.scalar_type());
  if (!dst_dtype.is_ok()) return dst_dtype.status().with_context(what);
  if (*dst_dtype != src.dtype) {
    return mismatch(what + ": dtype mismatch (expected " + dtype_name(*dst_dtype) + ", got " +
                    dtype_name(src.dtype) + ")");
  }
  std::vector<int64_t> dst_shape = dst.sizes().vec();
  if (dst_shape != src.shape) {
    return mismatch(what + ": shape mismatch (expected " + shape_string(dst_shape) + ", got " +
                    shape_string(src.shape) + ")");
  }
  return Status::ok();
}

Status check_compatible(const Tensor& src, const torch::Tensor& dst, const std::string& name) {
  CKPT_RETURN_IF_ERROR(check_dtype_shape(src, dst, name));
  const std::string what = "tensor \"" + name + "\"";
  std::optional<size_t> expected = dense_nbytes(src.dtype, src.shape);
  if (!expected || src.nbytes != *expected || (src.nbytes != 0 && src.data == nullptr)) {
    return corrupt(what + ": holds " + std::to_string(src.nbytes) +
                   " bytes, its dtype and shape need " +
                   (expected ? std::to_string(*expected) : std::string("an impossible size")));
  }
  return Status::ok();
}

Status copy_into(const Tensor& src, torch::Tensor& dst, const std::string& name) {
  CKPT_RETURN_IF_ERROR(check_compatible(src, dst, name));
  const std::string what = "tensor \"" + name + "\"";
  if (src.nbytes == 0) return Status::ok();
  try {
    at::NoGradGuard no_grad;
    if (dtype_is_quantized(src.dtype)) {
      // copy_ between quantized tensors requantizes; the stored integers must land verbatim.
      if (!dst.device().is_cpu() || !dst.is_contiguous()) {
        return unsupported(what + ": restoring a quantized tensor needs a contiguous CPU target");
      }
      std::memcpy(dst.data_ptr(), src.data, src.nbytes);
      return Status::ok();
    }
    // A borrowed view of the checkpoint bytes: copy_ only reads it, and handles any device,
    // dtype-equal strided target in one pass.
    at::Tensor view = at::from_blob(const_cast<void*>(src.data), src.shape,
                                    at::TensorOptions().dtype(dst.scalar_type()));
    dst.copy_(view);
    return Status::ok();
  } catch (const c10::Error& e) {
    return internal_error(what + ": libtorch copy failed: " + e.what_without_backtrace());
  }
}

}  // namespace ckpt::torch_adapter
