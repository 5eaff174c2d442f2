// The binding of ckpt::HostMemory (ckpt/io/host_memory.h): ckpt._core.host_tensor_capsule(n), a
// DLPack capsule of n uint8 bytes in memory advised to use huge pages, which
// torch.utils.dlpack.from_dlpack turns into a tensor that owns it. Memory for a restore to fill.
#pragma once

#include <pybind11/pybind11.h>

namespace ckpt::python {
void bind_host_tensor(pybind11::module_& m);
}  // namespace ckpt::python
