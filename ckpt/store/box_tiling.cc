#include "ckpt/store/box_tiling.h"

#include <algorithm>
#include <unordered_set>

namespace ckpt::store {
namespace {

Extent intersect(const Extent& a, const Extent& b) {
  Extent e;
  e.ndim = a.ndim;
  for (int d = 0; d < a.ndim; ++d) {
    const int64_t lo = std::max(a.offsets[d], b.offsets[d]);
    const int64_t hi = std::min(a.offsets[d] + a.sizes[d], b.offsets[d] + b.sizes[d]);
    e.offsets[d] = lo;
    e.sizes[d] = std::max<int64_t>(hi - lo, 0);
  }
  return e;
}

class Sweep {
 public:
  Sweep(std::string_view tensor, const std::vector<int64_t>& shape,
        const std::vector<Extent>& boxes, TilingReport* report, size_t max_findings,
        const BoxLabel& label)
      : tensor_(tensor),
        shape_(shape),
        boxes_(boxes),
        report_(report),
        max_(max_findings),
        label_(label) {
    slab_.ndim = static_cast<int>(shape.size());
  }

  void run() {
    const int ndim = static_cast<int>(shape_.size());
    std::vector<uint32_t> ids;
    ids.reserve(boxes_.size());
    bool empty_tensor = false;
    for (int64_t s : shape_) empty_tensor = empty_tensor || s == 0;
    for (size_t i = 0; i < boxes_.size(); ++i) {
      const Extent& e = boxes_[i];
      bool inside = e.ndim == ndim;
      for (int d = 0; inside && d < ndim; ++d) {
        inside = e.offsets[d] >= 0 && e.sizes[d] >= 0 && e.offsets[d] <= shape_[d] - e.sizes[d];
      }
      if (!inside) {
        add(TilingProblem::kOutOfBounds, e, {i},
            label(i) + " is outside the tensor's bounds " + extent_string(whole()));
        continue;
      }
      if (!e.empty()) ids.push_back(static_cast<uint32_t>(i));
    }
    if (empty_tensor) return;
    level(ids, 0);
  }

 private:
  Extent whole() const { return make_extent(std::vector<int64_t>(shape_.size(), 0), shape_); }

  std::string label(size_t i) const {
    if (label_) return label_(i);
    return "box " + std::to_string(i) + " " + extent_string(boxes_[i]);
  }

  void add(TilingProblem p, const Extent& range, std::vector<size_t> boxes,
           const std::string& what) {
    if (report_->findings.size() >= max_) {
      ++report_->left_off;
      return;
    }
    TilingFinding f;
    f.problem = p;
    f.tensor = std::string(tensor_);
    f.range = range;
    f.boxes = std::move(boxes);
    f.message = "tensor \"" + f.tensor + "\": " + tiling_problem_name(p) + ": " + what;
    report_->findings.push_back(std::move(f));
  }

  // The slab fixed along dimensions < d, whole along the rest.
  Extent slab_from(int d) const {
    Extent e = slab_;
    for (int k = d; k < e.ndim; ++k) {
      e.offsets[k] = 0;
      e.sizes[k] = shape_[k];
    }
    return e;
  }

  void gap(int d, int64_t lo, int64_t hi) {
    slab_.offsets[d] = lo;
    slab_.sizes[d] = hi - lo;
    const Extent e = slab_from(d + 1);
    add(TilingProblem::kGap, e, {}, "elements " + extent_string(e) + " are in no box");
  }

  void overlap(uint32_t a, uint32_t b) {
    const uint64_t key = uint64_t{std::min(a, b)} << 32 | std::max(a, b);
    if (!seen_.insert(key).second) return;
    const Extent e = intersect(boxes_[a], boxes_[b]);
    add(TilingProblem::kOverlap, e, {std::min(a, b), std::max(a, b)},
        "elements " + extent_string(e) + " are in both " + label(std::min(a, b)) + " and " +
            label(std::max(a, b)));
  }

  void level(std::vector<uint32_t>& ids, int d) {
    const int ndim = static_cast<int>(shape_.size());
    if (ndim == 0) {  // a 0-d tensor: exactly one box
      if (ids.empty()) add(TilingProblem::kGap, Extent{}, {}, "its element is in no box");
      for (size_t i = 1; i < ids.size(); ++i) overlap(ids[i - 1], ids[i]);
      return;
    }
    auto start = [&](uint32_t i) { return boxes_[i].offsets[d]; };
    auto end = [&](uint32_t i) { return boxes_[i].offsets[d] + boxes_[i].sizes[d]; };
    std::sort(ids.begin(), ids.end(), [&](uint32_t a, uint32_t b) {
      return start(a) != start(b) ? start(a) < start(b) : a < b;
    });
    std::vector<int64_t> cuts;
    cuts.reserve(2 * ids.size() + 2);
    cuts.push_back(0);
    cuts.push_back(shape_[d]);
    for (uint32_t i : ids) {
      cuts.push_back(start(i));
      cuts.push_back(end(i));
    }
    std::sort(cuts.begin(), cuts.end());
    cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
    std::vector<uint32_t> active, next;
    size_t pending = 0;
    for (size_t k = 0; k + 1 < cuts.size(); ++k) {
      const int64_t lo = cuts[k], hi = cuts[k + 1];
      size_t kept = 0;
      for (uint32_t i : active) {
        if (end(i) > lo) active[kept++] = i;
      }
      active.resize(kept);
      while (pending < ids.size() && start(ids[pending]) <= lo) active.push_back(ids[pending++]);
      if (active.empty()) {
        gap(d, lo, hi);
      } else if (d + 1 == ndim) {
        std::sort(active.begin(), active.end());
        for (size_t j = 1; j < active.size(); ++j) overlap(active[j - 1], active[j]);
      } else {
        slab_.offsets[d] = lo;
        slab_.sizes[d] = hi - lo;
        next = active;
        level(next, d + 1);
      }
    }
  }

  std::string_view tensor_;
  const std::vector<int64_t>& shape_;
  const std::vector<Extent>& boxes_;
  TilingReport* report_;
  size_t max_;
  const BoxLabel& label_;
  Extent slab_;
  std::unordered_set<uint64_t> seen_;
};

}  // namespace

const char* tiling_problem_name(TilingProblem p) {
  switch (p) {
    case TilingProblem::kGap:
      return "gap";
    case TilingProblem::kOverlap:
      return "overlap";
    case TilingProblem::kOutOfBounds:
      return "out of bounds";
  }
  return "?";
}

void check_tensor_tiling(std::string_view tensor, const std::vector<int64_t>& shape,
                         const std::vector<Extent>& boxes, TilingReport* report,
                         size_t max_findings, const BoxLabel& label) {
  ++report->tensors;
  report->boxes += boxes.size();
  Sweep(tensor, shape, boxes, report, max_findings, label).run();
}

TilingReport check_index_tiling(const GlobalIndex& index, size_t max_findings) {
  TilingReport report;
  std::vector<Extent> boxes;
  for (size_t t = 0; t < index.tensor_count(); ++t) {
    const IndexTensor& it = index.tensor(t);
    // One box per cell: the cells tile the tensor, so its boxes do.
    if (it.cell_aligned) {
      ++report.tensors;
      report.boxes += it.box_count;
      continue;
    }
    boxes.clear();
    for (uint32_t b = 0; b < it.box_count; ++b)
      boxes.push_back(index.box_extent(t, it.first_box + b));
    const std::vector<int64_t> shape(it.shape.begin(), it.shape.begin() + it.ndim);
    const BoxLabel label = [&](size_t i) {
      const uint32_t b = it.first_box + static_cast<uint32_t>(i);
      return "box " + std::to_string(i) + " " + extent_string(boxes[i]) +
             (index.has_record(b) ? " in " + std::string(index.file_name(index.box(b).file))
                                  : std::string());
    };
    check_tensor_tiling(index.tensor_name(t), shape, boxes, &report, max_findings, label);
  }
  return report;
}

Status tiling_status(const TilingReport& report, const std::string& where) {
  if (report.ok()) return Status::ok();
  const uint64_t more = report.findings.size() - 1 + report.left_off;
  std::string m = where + ": boxes do not tile: " + report.findings.front().message;
  if (more > 0) m += " (and " + std::to_string(more) + " more)";
  return corrupt(m);
}

std::vector<std::string> LossReport::lines(size_t max_ranges) const {
  std::vector<std::string> out;
  for (const LostTensor& t : tensors) {
    std::string s =
        "tensor \"" + t.tensor + "\" loses " + (t.whole() ? std::string("all ") : std::string()) +
        std::to_string(t.lost_elements) + " of " + std::to_string(t.total_elements) + " elements:";
    for (size_t i = 0; i < t.ranges.size() && i < max_ranges; ++i) {
      s += " " + extent_string(t.ranges[i]);
    }
    if (t.ranges.size() > max_ranges) {
      s += " and " + std::to_string(t.ranges.size() - max_ranges) + " more ranges";
    }
    s += " (";
    for (size_t i = 0; i < t.files.size(); ++i) s += (i ? ", " : "") + t.files[i];
    out.push_back(s + ")");
  }
  return out;
}

Result<LossReport> account_loss(const GlobalIndex& index, const std::vector<uint32_t>& files) {
  std::vector<bool> lost(index.file_count(), false);
  for (uint32_t f : files) {
    if (f >= index.file_count()) {
      return invalid_argument("account_loss: file id " + std::to_string(f) + " of " +
                              std::to_string(index.file_count()));
    }
    lost[f] = true;
  }
  LossReport report;
  for (size_t t = 0; t < index.tensor_count(); ++t) {
    const IndexTensor& it = index.tensor(t);
    LostTensor lt;
    lt.total_elements = 1;
    for (int d = 0; d < it.ndim; ++d) lt.total_elements *= static_cast<uint64_t>(it.shape[d]);
    for (uint32_t b = it.first_box; b < it.first_box + it.box_count; ++b) {
      if (!index.has_record(b)) continue;  // a partial index: a box its reader does not need
      const uint32_t f = index.box(b).file;
      if (!lost[f]) continue;
      const Extent e = index.box_extent(t, b);
      lt.ranges.push_back(e);
      lt.lost_elements += e.numel();
      report.lost_bytes += e.numel() * dtype_size(it.dtype);
      const std::string name(index.file_name(f));
      if (std::find(lt.files.begin(), lt.files.end(), name) == lt.files.end()) {
        lt.files.push_back(name);
      }
    }
    if (lt.ranges.empty()) continue;
    std::sort(lt.files.begin(), lt.files.end());
    lt.tensor = std::string(index.tensor_name(t));
    report.tensors.push_back(std::move(lt));
  }
  return report;
}

Result<LossReport> account_loss(const GlobalIndex& index, const std::vector<std::string>& files) {
  std::vector<uint32_t> ids;
  for (const std::string& name : files) {
    uint32_t f = 0;
    while (f < index.file_count() && index.file_name(f) != name) ++f;
    if (f == index.file_count()) {
      return invalid_argument("account_loss: \"" + name + "\" is not a file of the index");
    }
    ids.push_back(f);
  }
  return account_loss(index, ids);
}

}  // namespace ckpt::store
