// The trace importer's interval arithmetic (private to profile/): phase spans on the host, activity
// spans on the GPU, and what one step's window holds of each. Pure functions; thread-safe.
#pragma once

#include <string_view>
#include <utility>
#include <vector>

#include "profile/recorder/step_record.h"

namespace ckpt::profile {

// A host-side span attributed to a phase.
struct Interval {
  double start, end;
  Phase phase;
};

// One GPU activity (a kernel, copy or memset on some stream of the device).
enum class GpuKind : uint8_t { kCompute, kComm, kCopy, kPageableH2D };
struct GpuSpan {
  double start, end;
  GpuKind kind;
};

// The kind from a GPU event's name: ncclKernel_*/ncclDevKernel_* are communication, "Memcpy HtoD
// (Pageable -> Device)" a pageable host-to-device copy, other Memcpy/Memset events copies, the rest
// compute kernels.
GpuSpan gpu_span(std::string_view name, double start, double end);

using Ranges = std::vector<std::pair<double, double>>;
// Sorted, disjoint union of the given ranges.
Ranges merge_ranges(Ranges r);
double total_length(const Ranges& merged);
// Length of the intersection of two merged range lists.
double overlap_length(const Ranges& a, const Ranges& b);

// The GPU's part of one step window: busy, compute, communication and its exposed part,
// idle time while the host waited for data (host spans of phase data_wait), host sync time, and
// pageable HtoD time. `gpu`, `host` and `syncs` hold only what lies inside the window.
GpuStep gpu_step_times(const std::vector<GpuSpan>& gpu, const std::vector<Interval>& host,
                       const Ranges& syncs);

}  // namespace ckpt::profile
