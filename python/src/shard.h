// The bindings of sharded checkpoints (format version 2, docs/format.md §8): ckpt._core.ShardRead,
// assign_owners, read_index and MAX_FORMAT_VERSION.
#pragma once

#include <pybind11/pybind11.h>

#include "ckpt/io/env.h"

namespace ckpt::python {
Env* package_env();  // core.cc: the Env every binding reads and writes through
void bind_shard(pybind11::module_& m);
}  // namespace ckpt::python
