// The resumable sampler's binding (ckpt/loader): ckpt._core.Sampler.
#pragma once

#include <pybind11/pybind11.h>

#include "ckpt/base/status.h"

namespace ckpt::python {
[[noreturn]] void raise_status(const Status& s);
void check(const Status& s);
void bind_sampler(pybind11::module_& m);
}  // namespace ckpt::python
