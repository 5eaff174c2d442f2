#include "shard.h"

#include <pybind11/stl.h>

#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "ckpt/format/rank_root.h"
#include "ckpt/store/box_owner.h"
#include "resume/reshard_read.h"
#include "sampler.h"

namespace py = pybind11;

namespace ckpt::python {
namespace {

// ShardRead(step_dir, targets[, in_place, record]): record is the step's commit record when
// find_latest read it (else read here); targets are (tensor_path, offsets, sizes, ptr, nbytes,
// dtype[, fresh]). The constructor reads and checks every saved box the targets overlap (GIL
// released) and writes none of them but the fresh ones (memory allocated for this restore);
// copy_out() fills the others, reading the checked bytes again (from the page cache). With
// in_place, the constructor reads straight into them and copy_out() has nothing left to do
// (resume/reshard_read.h).
class PyShardRead {
 public:
  PyShardRead(const std::string& step_dir, const py::list& targets, bool in_place,
              const CommitRecord* record) {
    std::vector<resume::ShardTarget> ts;
    ts.reserve(targets.size());
    for (const py::handle& h : targets) {
      auto item = h.cast<py::tuple>();
      if (item.size() != 6 && item.size() != 7) {
        raise_status(invalid_argument(
            "ShardRead: a target is not (tensor, offsets, sizes, ptr, nbytes, dtype[, fresh])"));
      }
      auto [name, offsets, sizes, ptr, nbytes, dtype] =
          py::tuple(item[py::slice(0, 6, 1)])
              .cast<std::tuple<std::string, std::vector<int64_t>, std::vector<int64_t>, uintptr_t,
                               uint64_t, std::string>>();
      auto dt = dtype_from_name(dtype);
      if (!dt) raise_status(invalid_argument(name + ": unknown dtype " + dtype));
      if (offsets.size() != sizes.size() || sizes.size() > store::kMaxBoxDims) {
        raise_status(invalid_argument(name + ": a target's offsets and sizes differ in length"));
      }
      resume::ShardTarget t;
      t.tensor = name;
      t.extent = store::make_extent(offsets, sizes);
      t.dtype = *dt;
      t.data = reinterpret_cast<void*>(ptr);
      t.nbytes = nbytes;
      t.fresh = item.size() == 7 && item[6].cast<bool>();
      ts.push_back(std::move(t));
    }
    Result<resume::ShardRead> sr = Status::ok();
    {
      py::gil_scoped_release nogil;
      sr = resume::ShardRead::prepare(package_env(), step_dir, std::move(ts), {0, in_place, {}},
                                      record);
    }
    check(sr.status());
    sr_.emplace(std::move(*sr));
  }

  void copy_out() {
    Status s;
    {
      py::gil_scoped_release nogil;
      s = sr_->copy_out();
    }
    check(s);
  }

  py::dict stats() const {
    const resume::ShardReadStats& st = sr_->stats();
    py::dict d;
    d["files"] = st.files;
    d["boxes"] = st.boxes;
    d["chunks"] = st.chunks;
    d["bytes_read"] = st.bytes_read;
    d["bytes_copied"] = st.bytes_copied;
    d["bytes_in_place"] = st.bytes_in_place;
    d["bytes_reread"] = st.bytes_reread;
    d["bytes_fresh"] = st.bytes_fresh;
    d["bytes_cached"] = st.bytes_cached;
    d["index_bytes_read"] = st.index_bytes_read;
    d["index_reads"] = st.index_reads;
    return d;
  }

 private:
  std::optional<resume::ShardRead> sr_;
};

std::vector<int64_t> assign_owners(const std::vector<std::tuple<std::string, uint64_t>>& items,
                                   const std::vector<int64_t>& candidates,
                                   const std::vector<uint64_t>& initial_load,
                                   uint64_t small_bytes) {
  std::vector<store::ReplicatedItem> in;
  in.reserve(items.size());
  for (const auto& [name, bytes] : items) in.push_back({name, bytes});
  store::OwnerOptions opts;
  opts.candidates = candidates;
  opts.initial_load = initial_load;
  opts.small_bytes = small_bytes;
  auto out = store::assign_owners(in, opts);
  check(out.status());
  return out->owner;
}

// The INDEX of a step directory as plain data (tests, tools, the docs' examples).
py::dict read_index(const std::string& step_dir) {
  auto index = resume::read_step_index(package_env(), step_dir);
  check(index.status());
  py::list tensors;
  for (size_t t = 0; t < index->tensor_count(); ++t) {
    const store::IndexTensor& it = index->tensor(t);
    py::list boxes;
    for (uint32_t b = it.first_box; b < it.first_box + it.box_count; ++b) {
      const store::Extent e = index->box_extent(t, b);
      py::dict box;
      box["file"] = std::string(index->file_name(index->box(b).file));
      box["offsets"] = std::vector<int64_t>(e.offsets.begin(), e.offsets.begin() + e.ndim);
      box["sizes"] = std::vector<int64_t>(e.sizes.begin(), e.sizes.begin() + e.ndim);
      box["nbytes"] = index->box_nbytes(t, b);
      boxes.append(box);
    }
    py::dict d;
    d["name"] = std::string(index->tensor_name(t));
    d["dtype"] = std::string(dtype_name(it.dtype));
    d["shape"] = std::vector<int64_t>(it.shape.begin(), it.shape.begin() + it.ndim);
    d["placement"] = std::string(store::placement_name(it.placement));
    d["boxes"] = boxes;
    tensors.append(d);
  }
  py::list files;
  for (uint32_t f = 0; f < index->file_count(); ++f) files.append(std::string(index->file_name(f)));
  py::dict out;
  out["tensors"] = tensors;
  out["files"] = files;
  out["step"] = index->step;
  out["index_version"] = index->version();
  return out;
}

}  // namespace

void bind_shard(py::module_& m) {
  m.attr("MAX_FORMAT_VERSION") = kMaxFormatVersion;
  py::class_<PyShardRead>(m, "ShardRead")
      .def(py::init<const std::string&, const py::list&, bool, const CommitRecord*>(),
           py::arg("step_dir"), py::arg("targets"), py::arg("in_place") = false,
           py::arg("record") = nullptr)
      .def("copy_out", &PyShardRead::copy_out)
      .def("stats", &PyShardRead::stats);
  m.def("assign_owners", &assign_owners, py::arg("items"), py::arg("candidates"),
        py::arg("initial_load") = std::vector<uint64_t>{},
        py::arg("small_bytes") = uint64_t{1} << 20);
  m.def("read_index", &read_index, py::arg("step_dir"));
}

}  // namespace ckpt::python
