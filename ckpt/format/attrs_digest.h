// attrs_digest: XXH3-64 over a canonical serialisation of every attribute and alias in a checkpoint
// tree (docs/format.md §4). Tensor bytes have their own hashes; this covers the rest of the state
// (hyperparameters, cursors, counters) so a damaged attribute is detected on restore. Pure.
#pragma once

#include <cstdint>

#include "ckpt/format/tree.h"

namespace ckpt {

uint64_t attrs_digest(const Node& root);

}  // namespace ckpt
