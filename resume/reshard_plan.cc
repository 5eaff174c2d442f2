#include "resume/reshard_plan.h"

#include <algorithm>
#include <cstdint>
#include <unordered_map>

namespace ckpt::resume {
namespace {

using store::Extent;
using store::GlobalIndex;
using store::IndexTensor;

struct Builder {
  const GlobalIndex& index;
  ReshardPlan* plan;
  std::vector<int64_t> file_slot;  // index file id -> position in plan->files, or -1
  std::vector<uint32_t> candidates;
  // Set: add_target only lists the saved boxes a target meets (no record is needed for that).
  std::vector<TouchedBox>* collect = nullptr;

  ReshardFile& file(uint32_t f) {
    if (file_slot[f] < 0) {
      file_slot[f] = static_cast<int64_t>(plan->files.size());
      ReshardFile rf;
      rf.file = f;
      rf.name = std::string(index.file_name(f));
      plan->files.push_back(std::move(rf));
    }
    return plan->files[file_slot[f]];
  }

  // Saved boxes of tensor t whose cells may meet cells [lo, hi] (inclusive, per dimension).
  void find_candidates(const IndexTensor& t, const std::array<uint64_t, store::kMaxBoxDims>& lo,
                       const std::array<uint64_t, store::kMaxBoxDims>& hi) {
    candidates.clear();
    if (t.box_count == 0) return;
    if (t.ndim == 0) {
      for (uint32_t b = 0; b < t.box_count; ++b) candidates.push_back(t.first_box + b);
      plan->records_read += t.box_count;
      return;
    }
    if (t.cell_aligned) {  // box first_box + c is cell c: walk the cells
      std::array<uint64_t, store::kMaxBoxDims> at = lo;
      while (true) {
        uint64_t cell = 0;
        for (int d = 0; d < t.ndim; ++d) cell += at[d] * t.cell_stride[d];
        candidates.push_back(t.first_box + static_cast<uint32_t>(cell));
        int d = t.ndim - 1;
        while (d >= 0 && at[d] == hi[d]) {
          at[d] = lo[d];
          --d;
        }
        if (d < 0) break;
        ++at[d];
      }
      plan->records_read += candidates.size();
      return;
    }
    // Boxes are in cell order, so by first row: those starting in rows
    // [lo[0] - max_row_span, hi[0]] are the only ones that can reach rows [lo[0], hi[0]].
    const uint64_t row_lo = lo[0] > t.max_row_span ? lo[0] - t.max_row_span : 0;
    const uint64_t key_lo = row_lo * t.cell_stride[0];
    const uint64_t key_hi = (hi[0] + 1) * t.cell_stride[0];
    uint32_t a = t.first_box, b = t.first_box + t.box_count, probes = 0;
    auto lower = [&](uint64_t key) {
      uint32_t l = a, r = b;
      while (l < r) {
        const uint32_t m = l + (r - l) / 2;
        ++probes;
        if (index.box_cells(t, m).first < key) {
          l = m + 1;
        } else {
          r = m;
        }
      }
      return l;
    };
    const uint32_t from = lower(key_lo);
    const uint32_t to = key_hi > UINT32_MAX ? b : lower(key_hi);
    for (uint32_t i = from; i < to; ++i) candidates.push_back(i);
    plan->records_read += probes + (to - from);
  }

  Status add_target(uint32_t ti, const TargetBox& target) {
    const int64_t t_id = index.find_tensor(target.tensor);
    if (t_id < 0) {
      return not_found("reshard plan: tensor \"" + target.tensor + "\" is not in the index");
    }
    const IndexTensor& t = index.tensor(static_cast<size_t>(t_id));
    const Extent& T = target.extent;
    const std::string who =
        "reshard plan: tensor \"" + target.tensor + "\" target " + store::extent_string(T) + ": ";
    if (T.ndim != t.ndim) {
      return invalid_argument(who + "has " + std::to_string(T.ndim) + " dimensions, the tensor " +
                              std::to_string(t.ndim));
    }
    for (int d = 0; d < t.ndim; ++d) {
      if (T.offsets[d] < 0 || T.sizes[d] < 0 || T.offsets[d] > t.shape[d] - T.sizes[d]) {
        return invalid_argument(who + "is outside the tensor (dimension " + std::to_string(d) +
                                " has " + std::to_string(t.shape[d]) + " elements)");
      }
    }
    const uint64_t es = dtype_size(t.dtype);
    plan->target_bytes[ti] = T.numel() * es;
    if (T.empty()) return Status::ok();
    std::array<uint64_t, store::kMaxBoxDims> lo{}, hi{};
    for (int d = 0; d < t.ndim; ++d) {
      lo[d] = index.cell_of(t, d, T.offsets[d]);
      hi[d] = index.cell_of(t, d, T.offsets[d] + T.sizes[d] - 1);
    }
    find_candidates(t, lo, hi);
    uint64_t covered = 0;
    for (uint32_t b : candidates) {
      const Extent S = index.box_extent(static_cast<size_t>(t_id), b);
      Extent I;
      I.ndim = t.ndim;
      bool meets = true;
      for (int d = 0; d < t.ndim && meets; ++d) {
        const int64_t l = std::max(T.offsets[d], S.offsets[d]);
        const int64_t h = std::min(T.offsets[d] + T.sizes[d], S.offsets[d] + S.sizes[d]);
        meets = h > l;
        I.offsets[d] = l;
        I.sizes[d] = h - l;
      }
      if (!meets) continue;
      if (collect != nullptr) {
        collect->push_back(TouchedBox{static_cast<uint32_t>(t_id), b});
        continue;
      }
      covered += I.numel();
      ReshardFile& rf = file(index.box(b).file);
      if (rf.boxes.empty() || rf.boxes.back().box != b) {
        rf.boxes.push_back(TouchedBox{static_cast<uint32_t>(t_id), b});
      }
      add_runs(ti, b, es, S, T, I, &rf);
    }
    if (collect == nullptr && covered != T.numel()) {
      return corrupt(who + "the saved boxes cover " + std::to_string(covered) + " of its " +
                     std::to_string(T.numel()) + " elements (the index does not tile the tensor)");
    }
    return Status::ok();
  }

  // Runs of intersection I, contiguous in both the saved box S and the target T.
  void add_runs(uint32_t ti, uint32_t b, uint64_t es, const Extent& S, const Extent& T,
                const Extent& I, ReshardFile* rf) {
    const int nd = I.ndim;
    std::array<uint64_t, store::kMaxBoxDims> ss{}, ts{};  // row-major element strides
    uint64_t s_stride = 1, t_stride = 1;
    for (int d = nd - 1; d >= 0; --d) {
      ss[d] = s_stride;
      ts[d] = t_stride;
      s_stride *= static_cast<uint64_t>(S.sizes[d]);
      t_stride *= static_cast<uint64_t>(T.sizes[d]);
    }
    // Dimensions k.. form one run: every dimension after k spans both S and T whole.
    int k = nd - 1;
    while (k > 0 && I.sizes[k] == S.sizes[k] && I.sizes[k] == T.sizes[k]) --k;
    uint64_t run = 1;
    for (int d = std::max(k, 0); d < nd; ++d) run *= static_cast<uint64_t>(I.sizes[d]);
    const uint64_t box_base = index.box_offset(b);
    std::array<int64_t, store::kMaxBoxDims> at{};  // position inside I along dimensions < k
    while (true) {
      uint64_t src = 0, dst = 0;
      for (int d = 0; d < nd; ++d) {
        const int64_t x = I.offsets[d] + (d < k ? at[d] : 0);
        src += static_cast<uint64_t>(x - S.offsets[d]) * ss[d];
        dst += static_cast<uint64_t>(x - T.offsets[d]) * ts[d];
      }
      ReshardRun r;
      r.target = ti;
      r.box = b;
      r.file_offset = box_base + src * es;
      r.dst_offset = dst * es;
      r.nbytes = run * es;
      rf->runs.push_back(r);
      int d = k - 1;
      while (d >= 0 && at[d] + 1 == I.sizes[d]) {
        at[d] = 0;
        --d;
      }
      if (d < 0) break;
      ++at[d];
    }
  }
};

}  // namespace

Result<std::vector<TouchedBox>> boxes_for_targets(const GlobalIndex& index,
                                                  const std::vector<TargetBox>& targets) {
  ReshardPlan plan;
  plan.target_bytes.assign(targets.size(), 0);
  std::vector<TouchedBox> met;
  Builder builder{index, &plan, {}, {}, &met};
  for (size_t i = 0; i < targets.size(); ++i) {
    CKPT_RETURN_IF_ERROR(builder.add_target(static_cast<uint32_t>(i), targets[i]));
  }
  std::sort(met.begin(), met.end(),
            [](const TouchedBox& a, const TouchedBox& b) { return a.box < b.box; });
  met.erase(std::unique(met.begin(), met.end(),
                        [](const TouchedBox& a, const TouchedBox& b) { return a.box == b.box; }),
            met.end());
  return met;
}

Result<ReshardPlan> plan_reshard(const GlobalIndex& index, const std::vector<TargetBox>& targets) {
  ReshardPlan plan;
  plan.target_bytes.assign(targets.size(), 0);
  Builder builder{index, &plan, std::vector<int64_t>(index.file_count(), -1), {}};
  for (size_t i = 0; i < targets.size(); ++i) {
    CKPT_RETURN_IF_ERROR(builder.add_target(static_cast<uint32_t>(i), targets[i]));
  }
  std::sort(plan.files.begin(), plan.files.end(),
            [](const ReshardFile& a, const ReshardFile& b) { return a.file < b.file; });
  for (ReshardFile& rf : plan.files) {
    std::sort(rf.runs.begin(), rf.runs.end(), [](const ReshardRun& a, const ReshardRun& b) {
      return a.file_offset < b.file_offset;
    });
    // A run is maximal inside its box and target by construction; reads merge the runs whose
    // file ranges touch (neighbouring boxes of one file, rows of several targets).
    for (const ReshardRun& r : rf.runs) {
      if (!rf.reads.empty() && r.file_offset <= rf.reads.back().offset + rf.reads.back().nbytes) {
        FileRead& last = rf.reads.back();
        last.nbytes = std::max(last.offset + last.nbytes, r.file_offset + r.nbytes) - last.offset;
      } else {
        rf.reads.push_back(FileRead{r.file_offset, r.nbytes});
      }
    }
    for (const ReshardRun& r : rf.runs) rf.run_bytes += r.nbytes;
    std::sort(rf.boxes.begin(), rf.boxes.end(),
              [](const TouchedBox& a, const TouchedBox& b) { return a.box < b.box; });
    rf.boxes.erase(
        std::unique(rf.boxes.begin(), rf.boxes.end(),
                    [](const TouchedBox& a, const TouchedBox& b) { return a.box == b.box; }),
        rf.boxes.end());
    for (const TouchedBox& tb : rf.boxes) rf.box_bytes += index.box_nbytes(tb.tensor, tb.box);
    plan.run_bytes += rf.run_bytes;
    plan.box_bytes += rf.box_bytes;
  }
  return plan;
}

std::vector<ManifestEntry> box_entries(const GlobalIndex& index, const ReshardFile& file) {
  std::vector<ManifestEntry> out;
  out.reserve(file.boxes.size());
  for (const TouchedBox& tb : file.boxes) {
    const store::BoxRecord& r = index.box(tb.box);
    const Extent e = index.box_extent(tb.tensor, tb.box);
    ManifestEntry m;
    m.path = std::string(index.string(r.dataset));
    m.dtype = index.tensor(tb.tensor).dtype;
    m.shape.assign(e.sizes.begin(), e.sizes.begin() + e.ndim);
    m.offset = index.box_offset(tb.box);
    m.nbytes = index.box_nbytes(tb.tensor, tb.box);
    m.xxh3 = r.xxh3;
    out.push_back(std::move(m));
  }
  return out;
}

namespace {

// Per touched box of `file` (in file.boxes order): which of its `chunk`-byte chunks the runs
// touch.
std::vector<std::vector<bool>> touched_chunks(const GlobalIndex& index, const ReshardFile& file,
                                              const std::vector<uint64_t>& chunk) {
  std::vector<std::vector<bool>> out(file.boxes.size());
  std::unordered_map<uint32_t, size_t> slot;  // box id -> k (not a vector the index's size)
  for (size_t k = 0; k < file.boxes.size(); ++k) {
    const TouchedBox& tb = file.boxes[k];
    slot[tb.box] = k;
    if (chunk[k] > 0) {
      const uint64_t n = index.box_nbytes(tb.tensor, tb.box);
      out[k].assign((n + chunk[k] - 1) / chunk[k], false);
    }
  }
  for (const ReshardRun& r : file.runs) {
    const auto it = slot.find(r.box);
    if (it == slot.end()) continue;
    const size_t k = it->second;
    if (chunk[k] == 0 || r.nbytes == 0) continue;
    const uint64_t at = r.file_offset - index.box_offset(r.box);
    for (uint64_t c = at / chunk[k]; c <= (at + r.nbytes - 1) / chunk[k]; ++c) out[k][c] = true;
  }
  return out;
}

}  // namespace

bool reads_part_of_a_box(const GlobalIndex& index, const ReshardFile& file, uint64_t min_bytes) {
  std::unordered_map<uint32_t, uint64_t> used;
  for (const ReshardRun& r : file.runs) used[r.box] += r.nbytes;
  for (const TouchedBox& tb : file.boxes) {
    const uint64_t n = index.box_nbytes(tb.tensor, tb.box);
    if (n > min_bytes && used[tb.box] < n) return true;
  }
  return false;
}

Result<std::vector<CheckedRead>> checked_reads(const GlobalIndex& index, const ReshardFile& file,
                                               const Manifest* manifest) {
  std::vector<ManifestEntry> whole = box_entries(index, file);
  std::vector<uint64_t> chunk(whole.size(), 0);
  if (manifest != nullptr) {
    for (size_t k = 0; k < whole.size(); ++k) {
      const ManifestEntry& b = whole[k];
      const auto it = std::find_if(manifest->tensors.begin(), manifest->tensors.end(),
                                   [&](const ManifestEntry& e) { return e.path == b.path; });
      if (it == manifest->tensors.end()) continue;  // a box the manifest does not list: whole
      if (it->offset != b.offset || it->nbytes != b.nbytes || it->xxh3 != b.xxh3) {
        return corrupt(manifest->file + ": the manifest and the INDEX disagree on box \"" + b.path +
                       "\" (offset, size or xxh3)");
      }
      if (it->chunk_bytes > 0) {
        whole[k].chunk_bytes = it->chunk_bytes;
        whole[k].chunk_xxh3 = it->chunk_xxh3;
        chunk[k] = it->chunk_bytes;
      }
    }
  }
  const std::vector<std::vector<bool>> touched = touched_chunks(index, file, chunk);
  std::vector<CheckedRead> out;
  for (size_t k = 0; k < whole.size(); ++k) {
    const uint32_t box = file.boxes[k].box;
    const std::vector<bool>& t = touched[k];
    if (chunk[k] == 0 || std::all_of(t.begin(), t.end(), [](bool b) { return b; })) {
      out.push_back({std::move(whole[k]), box, 0, true});
      continue;
    }
    for (size_t c = 0; c < t.size(); ++c) {
      if (!t[c]) continue;
      const uint64_t at = c * chunk[k];
      const uint64_t n = std::min(chunk[k], whole[k].nbytes - at);
      ManifestEntry e;
      e.path =
          whole[k].path + " bytes [" + std::to_string(at) + ", " + std::to_string(at + n) + ")";
      e.dtype = DType::kUInt8;
      e.shape = {static_cast<int64_t>(n)};
      e.offset = whole[k].offset + at;
      e.nbytes = n;
      e.xxh3 = whole[k].chunk_xxh3[c];
      out.push_back({std::move(e), box, at, false});
    }
  }
  return out;
}

}  // namespace ckpt::resume
