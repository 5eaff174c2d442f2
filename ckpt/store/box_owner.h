// Which rank writes each replicated tensor (format version 2, docs/format.md "Ownership").
//
// A replicated tensor (DDP, the replicate dimension of HSDP, a parameter tensor parallelism
// leaves whole) is written once. Every rank knows the same list of replicated tensors and the
// same per-rank load (the bytes of its own shards, from the placements), so every rank computes
// the same owners locally, without a collective: tensors in order of size, largest first (ties:
// name), each to the least-loaded candidate rank (ties: the lowest rank). Tensors below
// `small_bytes` all go to the first candidate, so a restore does not need every rank's file for
// a handful of tiny tensors (the complaint in pytorch/pytorch#125740). The result depends on the
// set of items, never on the order they were listed in. Pure; thread-compatible.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ckpt/base/status.h"

namespace ckpt::store {

struct ReplicatedItem {
  std::string name;
  uint64_t bytes = 0;
};

struct OwnerOptions {
  // The ranks that may write (e.g. one replica group); sorted or not, no duplicates.
  std::vector<int64_t> candidates;
  // Bytes each candidate already writes (its shards), aligned with `candidates`; empty = zeros.
  std::vector<uint64_t> initial_load;
  uint64_t small_bytes = uint64_t{1} << 20;
};

struct OwnerAssignment {
  std::vector<int64_t> owner;        // owner[i] writes items[i]
  std::vector<uint64_t> final_load;  // per candidate (in sorted candidate order)
  std::vector<int64_t> candidates;   // sorted
};

// On failure (no candidate, a duplicate candidate or item name, initial_load of another length)
// kInvalidArgument.
Result<OwnerAssignment> assign_owners(const std::vector<ReplicatedItem>& items,
                                      const OwnerOptions& options);

}  // namespace ckpt::store
