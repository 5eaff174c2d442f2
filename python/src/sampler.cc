// ckpt._core.Sampler: ckpt::loader::ResumableSampler for ckpt.ResumableLoader, plus the per-batch
// seed that workers' augmentation draws from. The order, the cursor, resharding and the loader
// node's attributes are all the C++ ones; Python only iterates.
#include "sampler.h"

#include <pybind11/stl.h>

#include <cstring>
#include <string>
#include <tuple>
#include <vector>

#include "ckpt/base/hash.h"
#include "ckpt/format/tree.h"
#include "ckpt/loader/resumable_sampler.h"
#include "ckpt/loader/sampler_node.h"

namespace py = pybind11;

namespace ckpt::python {
namespace {

using loader::EpochPermutation;
using loader::LoaderCursor;
using loader::ResumableSampler;
using loader::SamplerSpec;

ResumableSampler make(uint64_t n, uint64_t seed, bool shuffle, bool drop_last, uint32_t world,
                      uint32_t rank, uint32_t batch, const std::string& fingerprint) {
  SamplerSpec spec;
  spec.dataset_size = n;
  spec.dataset_fingerprint = fingerprint;
  spec.seed = seed;
  spec.shuffle = shuffle;
  spec.drop_last = drop_last;
  spec.world_size = world;
  spec.batch_size = batch;
  auto s = ResumableSampler::create(spec, rank);
  if (!s.is_ok()) raise_status(s.status());
  return std::move(*s);
}

// The loader node's attributes (sampler_node.h) as a dict of Python scalars.
py::dict state(const ResumableSampler& s) {
  Node node;
  loader::sampler_to_node(s.spec(), s.cursor(), &node);
  py::dict d;
  for (const auto& [k, v] : node.attrs)
    d[py::str(k)] = std::visit([](const auto& x) -> py::object { return py::cast(x); }, v);
  return d;
}

// The cursor a saved loader node gives `s`, resharded to s's world size; refuses a node that
// describes another dataset or order. Changes nothing.
loader::LoaderCursor checked_cursor(const ResumableSampler& s, const py::dict& d) {
  Node node;
  for (auto [k, v] : d) {
    const std::string name = k.cast<std::string>();
    if (py::isinstance<py::bool_>(v))
      node.attrs[name] = v.cast<bool>();
    else if (py::isinstance<py::int_>(v))
      node.attrs[name] = v.cast<int64_t>();
    else if (py::isinstance<py::str>(v))
      node.attrs[name] = v.cast<std::string>();
  }
  auto sc = loader::sampler_from_node(node);
  if (!sc.is_ok()) raise_status(sc.status().with_context("loader"));
  const SamplerSpec& saved = sc->first;
  const SamplerSpec& here = s.spec();
  if (saved.dataset_size != here.dataset_size || saved.seed != here.seed ||
      saved.shuffle != here.shuffle || saved.drop_last != here.drop_last ||
      saved.dataset_fingerprint != here.dataset_fingerprint) {
    raise_status(mismatch(
        "loader: the checkpoint describes another dataset or order (dataset_size " +
        std::to_string(saved.dataset_size) + " vs " + std::to_string(here.dataset_size) +
        ", seed " + std::to_string(saved.seed) + " vs " + std::to_string(here.seed) + ")"));
  }
  check(loader::validate_cursor(here, sc->second));
  return sc->second;
}

// Applies a saved loader node to `s` (checked_cursor's refusals first).
void load_state(ResumableSampler& s, const py::dict& d) { s.set_cursor(checked_cursor(s, d)); }

// Under drop_last = false an epoch's last step holds L = N - position < G positions, so rank r
// gets floor(L / W) or ceil(L / W) of them, none when L < W (and default_collate fails on an empty
// batch). DistributedSampler pads instead, and so does ResumableLoader: every rank gets
// ceil(L / W). These are the ids rank s.rank() adds after its own: the virtual positions g in
// [N, position + ceil(L / W) * W) with g mod W == rank, each the sample at position g mod N of
// the epoch's order (the head of the epoch, repeated). Empty for every other step, under
// drop_last, and at an epoch end. The cursor never counts them: it stops at N.
std::vector<uint64_t> tail_padding(const ResumableSampler& s, uint64_t epoch, uint64_t position) {
  const SamplerSpec& spec = s.spec();
  const uint64_t n = spec.dataset_size, w = spec.world_size;
  std::vector<uint64_t> ids;
  if (spec.drop_last || position >= n || n - position >= spec.global_batch()) return ids;
  const uint64_t end = position + (n - position + w - 1) / w * w;
  const EpochPermutation order = s.order(epoch);
  for (uint64_t g = n + (s.rank() + w - n % w) % w; g < end; g += w) ids.push_back(order.at(g % n));
  return ids;
}

// The seed of batch `index` of `epoch`: XXH3 of the three words, so a batch's augmentation does
// not depend on which worker served it or what it served before.
uint64_t batch_seed(uint64_t seed, uint64_t epoch, uint64_t index) {
  uint64_t words[3] = {seed, epoch, index};
  return xxh3_64(words, sizeof words);
}

}  // namespace

void bind_sampler(py::module_& m) {
  py::class_<ResumableSampler>(m, "Sampler")
      .def(py::init(&make), py::arg("dataset_size"), py::arg("seed"), py::arg("shuffle"),
           py::arg("drop_last"), py::arg("world_size"), py::arg("rank"), py::arg("batch_size"),
           py::arg("fingerprint") = "")
      .def("next_batch", &ResumableSampler::next_batch)
      .def("cursor",
           [](const ResumableSampler& s) {
             return std::make_tuple(s.cursor().epoch, s.cursor().position);
           })
      .def("set_cursor",
           [](ResumableSampler& s, uint64_t epoch, uint64_t position) {
             LoaderCursor c{epoch, position};
             check(loader::validate_cursor(s.spec(), c));
             s.set_cursor(c);
           })
      .def("at_epoch_end", [](const ResumableSampler& s) { return s.at_epoch_end(s.cursor()); })
      .def("remaining_steps",
           [](const ResumableSampler& s) { return s.remaining_steps(s.cursor()); })
      .def("tail_padding", &tail_padding, py::arg("epoch"), py::arg("position"))
      .def("steps_per_epoch", &ResumableSampler::steps_per_epoch)
      .def("copy", [](const ResumableSampler& s) { return ResumableSampler(s); })
      .def("state", &state)
      .def("load_state", &load_state)
      .def("check_state",
           [](const ResumableSampler& s, const py::dict& d) { checked_cursor(s, d); });
  m.def("batch_seed", &batch_seed, py::arg("seed"), py::arg("epoch"), py::arg("index"));
}

}  // namespace ckpt::python
