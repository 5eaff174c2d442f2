// The loader component of a checkpoint: a SamplerSpec and a LoaderCursor as typed attributes of a
// ckpt::Node (ckpt/format/tree.h), so h5py and h5dump show them and a verifier can recompute the
// order offline. The cursor is global (see resumable_sampler.h), so no rank is recorded.
//
// Attributes written (all on the node itself):
//   dataset_size  int64          dataset_fingerprint string   seed  int64 (the uint64's bits)
//   shuffle       bool           drop_last           bool     world_size, batch_size  int64
//   epoch         int64          position            int64    order string (kOrderAlgorithm)
// Free functions on values; thread-safe as long as the node is not mutated concurrently.
#pragma once

#include <utility>

#include "ckpt/base/status.h"
#include "ckpt/format/tree.h"
#include "ckpt/loader/resumable_sampler.h"

namespace ckpt::loader {

// Writes the attributes above into `loader` (overwriting those names, leaving others).
void sampler_to_node(const SamplerSpec& spec, const LoaderCursor& cursor, Node* loader);

// On success the spec and cursor, validated (validate_spec, validate_cursor). On failure an
// invalid_argument / corrupt Status naming the missing or ill-typed attribute, e.g.
// `loader: attribute "epoch" is a string, expected int64`. `order` may be absent (read as
// kOrderAlgorithm); another value is `unsupported`.
Result<std::pair<SamplerSpec, LoaderCursor>> sampler_from_node(const Node& loader);

}  // namespace ckpt::loader
