#include "tests/shard/shard_layout.h"

#include <catch2/catch.hpp>
#include <cstring>

#include "ckpt/base/hash.h"

namespace ckpt::testing {

std::pair<int64_t, int64_t> chunk_range(int64_t n, int64_t k, int64_t r) {
  const int64_t c = (n + k - 1) / k;
  const int64_t lo = std::min(r * c, n), hi = std::min((r + 1) * c, n);
  return {lo, hi - lo};
}

store::Extent mesh_box(const std::vector<int64_t>& shape, const std::vector<int64_t>& mesh,
                       const std::vector<int>& shard_dim, int64_t rank) {
  store::Extent e = store::make_extent(std::vector<int64_t>(shape.size(), 0), shape);
  std::vector<int64_t> coord(mesh.size());
  int64_t rest = rank;
  for (int m = static_cast<int>(mesh.size()) - 1; m >= 0; --m) {
    coord[m] = rest % mesh[m];
    rest /= mesh[m];
  }
  for (size_t m = 0; m < mesh.size(); ++m) {
    const int d = shard_dim[m];
    if (d < 0) continue;
    const auto [off, size] = chunk_range(e.sizes[d], mesh[m], coord[m]);
    e.offsets[d] += off;
    e.sizes[d] = size;
  }
  return e;
}

namespace {

// Element value at global row-major position g.
uint64_t value_at(const SyntheticTensor& t, uint64_t g) { return t.seed * 1000003ull + g; }

void put_element(const SyntheticTensor& t, uint64_t g, char* out) {
  const uint64_t v = value_at(t, g);
  const size_t es = dtype_size(t.dtype);
  for (size_t i = 0; i < es; ++i) out[i] = static_cast<char>(v >> (8 * (i % 8)));
}

}  // namespace

std::string expected_bytes(const SyntheticTensor& t, const store::Extent& e) {
  const size_t es = dtype_size(t.dtype);
  std::string out(e.numel() * es, '\0');
  if (e.empty()) return out;
  const int nd = e.ndim;
  std::vector<int64_t> at(nd, 0);
  for (uint64_t n = 0; n < e.numel(); ++n) {
    uint64_t g = 0;
    for (int d = 0; d < nd; ++d) g = g * static_cast<uint64_t>(t.shape[d]) + e.offsets[d] + at[d];
    put_element(t, g, &out[n * es]);
    for (int d = nd - 1; d >= 0; --d) {
      if (++at[d] < e.sizes[d]) break;
      at[d] = 0;
    }
  }
  return out;
}

SavedCheckpoint save_synthetic(const std::vector<SyntheticTensor>& tensors,
                               const std::vector<std::vector<store::Extent>>& boxes, int64_t ranks,
                               const std::vector<int64_t>& file_of_box) {
  SavedCheckpoint saved;
  store::IndexBuilder builder(7);
  saved.files.assign(ranks, std::string(4096, 'H'));  // "HDF5 metadata" before the first box
  std::vector<uint32_t> file_ids;
  for (int64_t r = 0; r < ranks; ++r) {
    char name[32];
    std::snprintf(name, sizeof(name), "rank-%05lld.h5", static_cast<long long>(r));
    saved.file_names.push_back(name);
    auto id = builder.add_file(name);
    REQUIRE(id.is_ok());
    file_ids.push_back(*id);
  }
  for (size_t t = 0; t < tensors.size(); ++t) {
    auto dataset = builder.intern("/" + tensors[t].name);
    REQUIRE(dataset.is_ok());
    std::vector<store::BoxSource> sources;
    for (int64_t k = 0; k < static_cast<int64_t>(boxes[t].size()); ++k) {
      const int64_t r = file_of_box.empty() ? k : file_of_box[k];
      if (r >= ranks) break;
      const store::Extent& e = boxes[t][k];
      if (e.ndim < 0) continue;  // this rank holds nothing of the tensor
      store::BoxSource s;
      s.extent = e;
      s.file = file_ids[r];
      s.dataset = *dataset;
      if (!e.empty()) {
        std::string& f = saved.files[r];
        f.resize((f.size() + 4095) / 4096 * 4096, 'P');
        s.offset = f.size();
        const std::string bytes = expected_bytes(tensors[t], e);
        s.xxh3 = xxh3_64(bytes.data(), bytes.size());
        f += bytes;
      }
      sources.push_back(s);
    }
    store::TensorSpec spec;
    spec.name = tensors[t].name;
    spec.dtype = tensors[t].dtype;
    spec.shape = tensors[t].shape;
    spec.placement = store::Placement::kSharded;
    const Status s = builder.add_tensor(spec, sources);
    INFO(s.to_string());
    REQUIRE(s.is_ok());
  }
  saved.index = std::move(builder).finish();
  return saved;
}

std::vector<std::string> apply_plan(const SavedCheckpoint& saved, const resume::ReshardPlan& plan) {
  std::vector<std::string> out;
  for (uint64_t n : plan.target_bytes) out.emplace_back(n, '\xee');
  for (const resume::ReshardFile& f : plan.files) {
    const std::string& bytes = saved.files.at(f.file);
    for (const resume::ReshardRun& r : f.runs) {
      REQUIRE(r.file_offset + r.nbytes <= bytes.size());
      REQUIRE(r.dst_offset + r.nbytes <= out.at(r.target).size());
      std::memcpy(&out[r.target][r.dst_offset], bytes.data() + r.file_offset, r.nbytes);
    }
  }
  return out;
}

}  // namespace ckpt::testing
