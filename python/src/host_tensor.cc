#include "host_tensor.h"

#include <pybind11/stl.h>

#include <cstdint>
#include <memory>
#include <new>
#include <optional>
#include <utility>

#include "ckpt/io/host_memory.h"

namespace py = pybind11;

namespace ckpt::python {
namespace {

// DLPack's legacy (unversioned) ABI, which torch 1.10 and later take as a "dltensor" capsule;
// spelled here so that _core needs no torch or DLPack header (dlpack.h, v0.8).
struct DLDevice {
  int32_t device_type;  // kDLCPU = 1
  int32_t device_id;
};
struct DLDataType {
  uint8_t code;  // kDLUInt = 1
  uint8_t bits;
  uint16_t lanes;
};
struct DLTensor {
  void* data;
  DLDevice device;
  int32_t ndim;
  DLDataType dtype;
  int64_t* shape;
  int64_t* strides;  // null: compact row-major
  uint64_t byte_offset;
};
struct DLManagedTensor {
  DLTensor dl_tensor;
  void* manager_ctx;
  void (*deleter)(DLManagedTensor* self);
};

// What the capsule owns: the memory and the shape DLPack points at. Freed by the deleter, from
// whichever thread drops the tensor's last reference: no Python call, so no GIL is needed.
struct Owned {
  DLManagedTensor managed{};
  int64_t shape[1] = {0};
  HostMemory memory;
};

void delete_owned(DLManagedTensor* self) { delete static_cast<Owned*>(self->manager_ctx); }

// A capsule nobody consumed (from_dlpack renames the ones it takes to "used_dltensor").
void capsule_gone(PyObject* capsule) {
  if (PyCapsule_IsValid(capsule, "dltensor") == 0) return;
  auto* m = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(capsule, "dltensor"));
  if (m != nullptr && m->deleter != nullptr) m->deleter(m);
}

py::capsule host_tensor_capsule(uint64_t nbytes) {
  auto memory = HostMemory::allocate(nbytes, /*populate=*/false, "a restored tensor");
  if (!memory.is_ok()) throw std::bad_alloc();
  auto owned = std::make_unique<Owned>();
  owned->memory = std::move(memory).value();
  owned->shape[0] = static_cast<int64_t>(nbytes);
  DLTensor& t = owned->managed.dl_tensor;
  t.data = owned->memory.data();
  t.device = {1, 0};
  t.ndim = 1;
  t.dtype = {1, 8, 1};
  t.shape = owned->shape;
  t.strides = nullptr;
  t.byte_offset = 0;
  owned->managed.manager_ctx = owned.get();
  owned->managed.deleter = &delete_owned;
  PyObject* capsule = PyCapsule_New(&owned->managed, "dltensor", &capsule_gone);
  if (capsule == nullptr) throw py::error_already_set();
  owned.release();  // the capsule, then the tensor, owns it
  return py::reinterpret_steal<py::capsule>(capsule);
}

}  // namespace

void bind_host_tensor(py::module_& m) {
  m.def("host_tensor_capsule", &host_tensor_capsule, py::arg("nbytes"),
        "A DLPack capsule of nbytes uint8 in fresh host memory (huge pages advised): "
        "torch.utils.dlpack.from_dlpack(capsule) is a tensor that owns it.");
  m.def("huge_pages_enabled", &huge_pages_enabled);
  m.def(
      "prefer_host_memory",
      [](uint64_t nbytes, std::optional<uint64_t> malloc_free) {
        return prefer_host_memory(nbytes, malloc_free ? *malloc_free : malloc_free_bytes());
      },
      py::arg("nbytes"), py::arg("malloc_free") = py::none(),
      "Whether a fresh tensor of nbytes belongs in host_tensor_capsule's memory rather than "
      "torch.empty's (ckpt/io/host_memory.h prefer_host_memory); malloc_free defaults to "
      "the bytes glibc's malloc holds free now.");
}

}  // namespace ckpt::python
