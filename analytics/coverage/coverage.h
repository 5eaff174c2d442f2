// Dataset coverage across restarts: given which positions of which epochs a run consumed (its
// visits, replayed from a run spec or read from our journal), how many distinct samples each
// epoch saw, how many visits were repeats, which samples it never saw, and how much of the
// dataset the run saw overall.
//
// Representation. Within an epoch whose visits all use one order (always, except a
// torch_random run whose generator was reseeded mid-epoch), everything is interval arithmetic in
// position space: unique = size of the union of the visited position intervals, repeats =
// visits − unique, never-visited = the complement; only the never-visited ids actually listed
// (up to max_ids, ascending) are mapped through the order, choosing between mapping every
// never-visited position and scanning ids upward through the inverse order, whichever is fewer
// lookups, so 10^9 samples cost about what 10^3 do. An epoch that mixes orders materialises its
// visited ids in a CRoaring bitmap.
//
// Pure function of its input; thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "analytics/coverage/sample_order.h"
#include "ckpt/base/status.h"

namespace ckpt::analytics {

struct PositionRange {
  uint64_t begin = 0;  // [begin, end)
  uint64_t end = 0;
};

// Positions [begin, end) of epoch `epoch` (unfolded: < SamplerConfig::epoch_length()), read
// through the order with key `order_key`.
struct Visit {
  uint64_t epoch = 0;
  uint64_t order_key = 0;
  uint64_t begin = 0;
  uint64_t end = 0;
};

// Where a restarted process took its first step.
struct RestartMark {
  int64_t step = 0;
  uint64_t epoch = 0;
  uint64_t position = 0;
};

struct CoverageInput {
  SamplerConfig sampler;
  std::vector<Visit> visits;
  std::vector<RestartMark> restarts;
  // A foreign run's orders, when they are not the sampler's own (make_order): permutations
  // rebuilt from saved generator states. With `orders_given`, a visit's order is
  // orders[order_key]; a key mapped to nullptr (or absent) has an unknown order (an unseeded
  // shuffle): its positions are known, its sample ids are not.
  bool orders_given = false;
  std::map<uint64_t, std::shared_ptr<const SampleOrder>> orders;
};

struct CoverageOptions {
  uint64_t max_ids = 100000;  // never-visited ids listed per epoch (the count is always exact)
  int strip_bins = 600;       // resolution of the per-epoch strip (for the SVG)
  // Strips are kept for the first and the last strip_epochs / 2 epochs only (what the chart
  // draws), so a run of many epochs does not hold a strip per epoch.
  size_t strip_epochs = 40;
};

struct EpochCoverage {
  uint64_t epoch = 0;
  uint64_t unique = 0;
  double fraction = 0;
  uint64_t visits = 0;   // samples consumed, padding and redone steps included
  uint64_t repeats = 0;  // visits beyond the first of each sample
  uint64_t never_visited_count = 0;
  std::vector<uint64_t> never_visited_ids;  // ascending, at most max_ids
  bool single_order = true;
  // Unknown orders. ids_known false: no id is listed (never_visited_ids empty). exact false
  // (several orders, one unknown): `unique` is a lower bound, `unique_max` the upper bound and
  // `unique_expected` the mean when each unknown order is an independent uniform shuffle;
  // never_visited_count is then N - unique, an upper bound. When exact, unique_max = unique.
  bool ids_known = true;
  bool exact = true;
  uint64_t unique_max = 0;
  double unique_expected = 0;
  // Single order: never-visited position ranges (complete). Mixed orders: empty.
  std::vector<PositionRange> never_visited_positions;
  // Visited fraction per bin of [0, N): positions (single order) or sample ids (mixed); empty
  // for epochs outside CoverageOptions::strip_epochs.
  std::vector<double> strip;
  std::vector<RestartMark> restarts;  // those that happened in this epoch
};

struct CoverageReport {
  uint64_t dataset_size = 0;
  std::string sampler;
  uint64_t epoch_length = 0;
  uint64_t steps_per_epoch = 0;
  std::vector<EpochCoverage> epochs;  // ascending epoch, only epochs with visits
  uint64_t overall_unique = 0;        // samples visited in at least one epoch
  double overall_fraction = 0;
  // False when an epoch's ids are unknown: overall_unique is then a lower bound, with the upper
  // bound and the mean over independent uniform shuffles.
  bool overall_exact = true;
  uint64_t overall_unique_max = 0;
  double overall_expected = 0;
  uint64_t total_visits = 0;
};

// On failure: the sampler's validation message, an out-of-range visit (internal), or the order
// construction failure (e.g. no libtorch for a shuffled torch kind).
Result<CoverageReport> compute_coverage(const CoverageInput& input, const CoverageOptions& options);

// Ranges of consecutive values in an ascending list (for the text report).
std::vector<PositionRange> runs_of(const std::vector<uint64_t>& ascending);

}  // namespace ckpt::analytics
