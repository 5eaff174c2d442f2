// A foreign run described for `ckpt coverage --run-spec FILE.json`: the sampler geometry and the
// segments of steps each process ran, replayed into visits (coverage.h) without any checkpoint.
//
//   {"dataset_size": N, "batch_size": B, "world_size": W, "grad_accum": 1,
//    "sampler": {"kind": "sequential"|"torch_random"|"torch_distributed"|"ckpt", "seed": S,
//                "shuffle": true, "drop_last": false},
//    "segments": [{"start_step": a, "end_step": b, "loader_resumed": false}, ...]}
//
// Replay. The first segment starts at epoch 0, position 0. A later segment restarts from the
// checkpoint at step a: the loader state at step a is the one the most recent earlier segment
// that reached a (start <= a <= end) had there. loader_resumed = true continues that state
// exactly; false keeps the epoch counter but restarts the epoch at position 0 — and, for
// torch_random, with a generator freshly seeded (a new process), so the order is the first
// permutation again. Steps [a, b) then consume S positions each (sample_order.h), moving to the
// next epoch after its last (possibly short) step. Segments may overlap: steps redone after a
// crash are visits too.
//
// Free functions on values; thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "analytics/coverage/coverage.h"
#include "analytics/coverage/sample_order.h"
#include "ckpt/base/status.h"
#include "ckpt/io/env.h"

namespace ckpt::analytics {

struct RunSegment {
  int64_t start_step = 0;
  int64_t end_step = 0;  // exclusive
  bool loader_resumed = false;
};

struct RunSpec {
  SamplerConfig sampler;
  std::vector<RunSegment> segments;
};

// The largest run spec read (a spec is a few hundred bytes; segments are one per launch).
constexpr uint64_t kMaxRunSpecBytes = 16ull << 20;

// On failure corrupt("<path>: <what is wrong>") — malformed JSON, a missing or ill-typed key, a
// segment with end_step < start_step, a value the sampler refuses (batch_size 0, ...), a file
// over kMaxRunSpecBytes or not a regular file.
Result<RunSpec> parse_run_spec(const std::string& text, const std::string& path);
Result<RunSpec> read_run_spec(Env* env, const std::string& path);

// The visits and restart marks of the replay. On failure invalid_argument when a segment starts
// at a step no earlier segment reached, or the run spans more than 10^6 epoch pieces.
Result<CoverageInput> replay_run(const RunSpec& spec);

}  // namespace ckpt::analytics
