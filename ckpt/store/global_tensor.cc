// Global tensors from their pieces (global_tensor.h).
#include "ckpt/store/global_tensor.h"

#include <algorithm>
#include <cstring>

#include "ckpt/base/hash.h"

namespace ckpt::store {
namespace {

// Copies a row-major box into its place in the whole tensor: one run per row of the leading
// dimensions the box does not span whole.
void scatter(const Extent& e, const std::vector<int64_t>& shape,
             const std::vector<uint64_t>& stride, size_t es, const char* src, char* dst) {
  const int nd = e.ndim;
  if (e.numel() == 0) return;
  int k = nd;  // dimensions k.. are spanned whole, so a run covers them
  while (k > 0 && e.offsets[k - 1] == 0 && e.sizes[k - 1] == shape[k - 1]) --k;
  // The run: dimension k-1's part times everything after it (k == 0: the whole tensor).
  const int lead = std::max(k - 1, 0);
  uint64_t run = 1;
  for (int d = lead; d < nd; ++d) run *= static_cast<uint64_t>(e.sizes[d]);
  if (k == 0) {
    std::memcpy(dst, src, run * es);
    return;
  }
  std::vector<int64_t> i(static_cast<size_t>(lead), 0);
  for (uint64_t r = 0;; ++r) {
    uint64_t at = static_cast<uint64_t>(e.offsets[lead]) * stride[lead];
    for (int d = 0; d < lead; ++d) at += static_cast<uint64_t>(e.offsets[d] + i[d]) * stride[d];
    std::memcpy(dst + at * es, src + r * run * es, run * es);
    int d = lead - 1;
    for (; d >= 0; --d) {
      if (++i[d] < e.sizes[d]) break;
      i[d] = 0;
    }
    if (d < 0) break;
  }
}

}  // namespace

std::vector<TensorPiece> index_pieces(const GlobalIndex& index, size_t t) {
  std::vector<TensorPiece> out;
  const IndexTensor& it = index.tensor(t);
  for (uint32_t b = it.first_box; b < it.first_box + it.box_count; ++b) {
    const Extent e = index.box_extent(t, b);
    out.push_back({e, std::string(index.file_name(index.box(b).file)), index.box_offset(b),
                   index.box_nbytes(t, b), index.box(b).xxh3,
                   "box " + std::to_string(b - it.first_box) + " " + extent_string(e), true});
  }
  return out;
}

Status GlobalTensorReader::assemble(const std::string& source, DType dtype,
                                    const std::vector<int64_t>& shape,
                                    const std::vector<TensorPiece>& pieces, char* dst) {
  const size_t es = dtype_size(dtype);
  const int nd = static_cast<int>(shape.size());
  std::vector<uint64_t> stride(static_cast<size_t>(nd), 1);  // row-major, in elements
  for (int d = nd - 2; d >= 0; --d) stride[d] = stride[d + 1] * static_cast<uint64_t>(shape[d + 1]);
  for (const TensorPiece& p : pieces) {
    const std::string where = path_join(dir_, p.file);
    if (p.nbytes != p.extent.numel() * es) {
      return corrupt(where + ": " + p.label + " of tensor \"" + source + "\" has " +
                     std::to_string(p.nbytes) + " bytes, its elements need " +
                     std::to_string(p.extent.numel() * es));
    }
    CKPT_ASSIGN_OR_RETURN(RandomAccessFile * f, file(where));
    box_.resize(p.nbytes);
    CKPT_RETURN_IF_ERROR(f->read_at(p.offset, box_.data(), p.nbytes));
    const uint64_t h = xxh3_64(box_.data(), box_.size());
    if (h != p.xxh3) {
      return corrupt(where + ": " + p.label + " of tensor \"" + source +
                     "\": xxh3 of its bytes is " + hex64(h) + ", the " +
                     (p.from_index ? "index" : "manifest") + " says " + hex64(p.xxh3));
    }
    ++checked_;
    scatter(p.extent, shape, stride, es, box_.data(), dst);
  }
  return Status::ok();
}

Result<RandomAccessFile*> GlobalTensorReader::file(const std::string& path) {
  auto it = open_.find(path);
  if (it != open_.end()) return it->second.get();
  CKPT_ASSIGN_OR_RETURN(auto f, env_->open_random(path));
  RandomAccessFile* raw = f.get();
  open_[path] = std::move(f);
  return raw;
}

}  // namespace ckpt::store
