#include "analytics/coverage/coverage.h"

#include <algorithm>
#include <map>
#include <memory>
#include <queue>
#include <roaring/roaring64map.hh>

namespace ckpt::analytics {
namespace {

// Adds the folded image of unfolded positions [b, e) in [0, n): DistributedSampler's padding
// repeats the order from its start, so position p reads the order at p mod n.
void fold_into(uint64_t b, uint64_t e, uint64_t n, std::vector<PositionRange>* out) {
  if (e <= b) return;
  if (e - b >= n) {
    out->push_back({0, n});
    return;
  }
  const uint64_t fb = b % n;
  const uint64_t fe = fb + (e - b);
  if (fe <= n) {
    out->push_back({fb, fe});
  } else {
    out->push_back({fb, n});
    out->push_back({0, fe - n});
  }
}

std::vector<PositionRange> merge_ranges(std::vector<PositionRange> v) {
  std::sort(v.begin(), v.end(), [](const PositionRange& a, const PositionRange& b) {
    return a.begin < b.begin || (a.begin == b.begin && a.end < b.end);
  });
  std::vector<PositionRange> out;
  for (const auto& r : v) {
    if (r.end <= r.begin) continue;
    if (!out.empty() && r.begin <= out.back().end) {
      out.back().end = std::max(out.back().end, r.end);
    } else {
      out.push_back(r);
    }
  }
  return out;
}

std::vector<PositionRange> complement(const std::vector<PositionRange>& merged, uint64_t n) {
  std::vector<PositionRange> out;
  uint64_t at = 0;
  for (const auto& r : merged) {
    if (r.begin > at) out.push_back({at, r.begin});
    at = r.end;
  }
  if (at < n) out.push_back({at, n});
  return out;
}

bool in_ranges(const std::vector<PositionRange>& merged, uint64_t p) {
  auto it = std::upper_bound(merged.begin(), merged.end(), p,
                             [](uint64_t v, const PositionRange& r) { return v < r.begin; });
  return it != merged.begin() && p < std::prev(it)->end;
}

// Visited fraction per bin of [0, n) from merged ranges.
std::vector<double> strip_from_ranges(const std::vector<PositionRange>& merged, uint64_t n,
                                      int bins_wanted) {
  const uint64_t bins = std::max<uint64_t>(1, std::min<uint64_t>(n, uint64_t(bins_wanted)));
  std::vector<double> strip(bins, 0.0);
  size_t r = 0;
  for (uint64_t k = 0; k < bins; ++k) {
    // 128-bit products keep k * n exact for n up to 2^62.
    const uint64_t lo = static_cast<uint64_t>((unsigned __int128)k * n / bins);
    const uint64_t hi = static_cast<uint64_t>((unsigned __int128)(k + 1) * n / bins);
    while (r < merged.size() && merged[r].end <= lo) ++r;
    uint64_t covered = 0;
    for (size_t q = r; q < merged.size() && merged[q].begin < hi; ++q) {
      covered += std::min(hi, merged[q].end) - std::max(lo, merged[q].begin);
    }
    strip[k] = hi > lo ? double(covered) / double(hi - lo) : 0.0;
  }
  return strip;
}

// The smallest `max_ids` ids at never-visited positions, ascending.
std::vector<uint64_t> list_never_ids(const SampleOrder& order,
                                     const std::vector<PositionRange>& never, uint64_t never_count,
                                     uint64_t max_ids) {
  std::vector<uint64_t> ids;
  if (max_ids == 0 || never_count == 0) return ids;
  const uint64_t n = order.size();
  const uint64_t want = std::min(max_ids, never_count);
  // Scanning ids upward finds `want` of them after about want * n / never_count lookups;
  // mapping every never-visited position costs never_count lookups.
  const long double scan_cost =
      std::min<long double>(n, (long double)want * (long double)n / (long double)never_count);
  if (scan_cost < (long double)never_count) {
    for (uint64_t id = 0; id < n && ids.size() < want; ++id) {
      if (!in_ranges(never, order.position_of(id))) continue;
      ids.push_back(id);
    }
    return ids;
  }
  // Keep the `want` smallest in a max-heap so memory stays O(max_ids).
  std::priority_queue<uint64_t> heap;
  for (const auto& r : never) {
    for (uint64_t p = r.begin; p < r.end; ++p) {
      const uint64_t id = order.id_at(p);
      if (heap.size() < want) {
        heap.push(id);
      } else if (id < heap.top()) {
        heap.pop();
        heap.push(id);
      }
    }
  }
  ids.resize(heap.size());
  for (size_t i = ids.size(); i-- > 0;) {
    ids[i] = heap.top();
    heap.pop();
  }
  return ids;
}

// The order of `key`: the input's own (nullptr when unknown) or the sampler's.
Result<std::shared_ptr<const SampleOrder>> order_of(const CoverageInput& in, uint64_t key) {
  if (!in.orders_given) return make_order(in.sampler, key);
  auto it = in.orders.find(key);
  return it == in.orders.end() ? nullptr : it->second;
}

uint64_t ranges_size(const std::vector<PositionRange>& merged) {
  uint64_t n = 0;
  for (const auto& r : merged) n += r.end - r.begin;
  return n;
}

// An epoch that mixes orders, some unknown: the ids of the known ones are counted, each unknown
// one only contributes how many positions it covered. Bounds and the mean over independent
// uniform shuffles (a sample escapes an unknown piece of u positions with probability 1 - u/N).
Status bound_mixed_epoch(const CoverageInput& in, const std::vector<const Visit*>& visits,
                         bool keep_strip, EpochCoverage* ec) {
  const uint64_t n = in.sampler.dataset_size;
  std::map<uint64_t, std::vector<PositionRange>> by_key;
  for (const Visit* v : visits) fold_into(v->begin, v->end, n, &by_key[v->order_key]);
  Roaring64Map known;
  std::vector<uint64_t> unknown;
  for (auto& [key, ranges] : by_key) {
    const std::vector<PositionRange> merged = merge_ranges(std::move(ranges));
    CKPT_ASSIGN_OR_RETURN(auto order, order_of(in, key));
    if (order == nullptr) {
      unknown.push_back(ranges_size(merged));
      continue;
    }
    for (const auto& r : merged) {
      for (uint64_t p = r.begin; p < r.end; ++p) known.add(order->id_at(p));
    }
  }
  const uint64_t k = known.cardinality();
  uint64_t lower = k, upper = k;
  long double escape = 1;
  for (uint64_t u : unknown) {
    lower = std::max(lower, u);
    upper += u;
    escape *= 1.0L - (long double)u / (long double)n;
  }
  ec->ids_known = false;
  ec->exact = false;
  ec->unique = lower;
  ec->unique_max = std::min(n, upper);
  ec->unique_expected = double((long double)n - (long double)(n - k) * escape);
  ec->never_visited_count = n - lower;
  // The strip shows the expected visited fraction: with unknown ids it is the same everywhere.
  if (keep_strip) ec->strip.assign(1, ec->unique_expected / double(n));
  return Status::ok();
}

bool all_orders_known(const CoverageInput& in, const std::vector<const Visit*>& visits) {
  if (!in.orders_given) return true;
  for (const Visit* v : visits) {
    auto it = in.orders.find(v->order_key);
    if (it == in.orders.end() || it->second == nullptr) return false;
  }
  return true;
}

// Overall coverage when some epoch's ids are unknown: each epoch is taken as an independent
// uniform draw of its unique count (the epochs of an unseeded shuffle are), so the lower bound is
// the best single epoch, the upper bound the sum, and the mean 1 - prod(1 - u_e / N).
void bound_overall(CoverageReport* r) {
  const uint64_t n = r->dataset_size;
  uint64_t lower = 0, upper = 0;
  long double escape = 1;
  for (const auto& e : r->epochs) {
    lower = std::max(lower, e.unique);
    upper += e.unique_max;
    escape *= 1.0L - (long double)e.unique_expected / (long double)n;
  }
  r->overall_unique = lower;
  r->overall_unique_max = std::min(n, upper);
  r->overall_expected = double((long double)n * (1.0L - escape));
  r->overall_exact = lower == r->overall_unique_max;
  if (r->overall_exact) r->overall_expected = double(lower);
}

// The samples visited in any epoch, at a cost that follows what was trained, not the dataset's
// size. Two ways, whichever touches fewer ids (chosen before any order is built):
//   union:      the ids of every epoch's visited positions, added up — sum over epochs of the
//               visits;
//   candidates: the ids the least-missed epoch never visited, minus those each other epoch
//               visited (per epoch the fewer of its candidates and its visits are looked up) —
//               that epoch's never-visited count plus, per other epoch, at most its visits.
// A full epoch leaves no candidate, so finished runs cost nothing here; a run of 21 single-sample
// epochs over 10^18 samples costs 21 lookups. Memory: one bitmap of the ids kept, at most
// ~N/8 bytes when dense and a few bytes per id when sparse.
class OverallSet {
 public:
  // `base` is the epoch whose never-visited positions seed the candidates, or -1 for the union.
  OverallSet(long base) : base_(base) {}
  bool union_mode() const { return base_ < 0; }
  long base() const { return base_; }

  void seed_candidates(const SampleOrder& order, const std::vector<PositionRange>& never) {
    for (const auto& r : never) {
      for (uint64_t p = r.begin; p < r.end; ++p) set_.add(order.id_at(p));
    }
  }
  // An epoch that used one order: `visited` are merged folded positions.
  void add_epoch(const SampleOrder& order, const std::vector<PositionRange>& visited,
                 uint64_t unique) {
    if (union_mode()) {
      for (const auto& r : visited) {
        for (uint64_t p = r.begin; p < r.end; ++p) set_.add(order.id_at(p));
      }
      return;
    }
    if (set_.cardinality() <= unique) {
      std::vector<uint64_t> seen;
      for (uint64_t id : set_) {
        if (in_ranges(visited, order.position_of(id))) seen.push_back(id);
      }
      for (uint64_t id : seen) set_.remove(id);
    } else {
      for (const auto& r : visited) {
        for (uint64_t p = r.begin; p < r.end && !set_.isEmpty(); ++p) set_.remove(order.id_at(p));
      }
    }
  }
  // An epoch that mixed orders: its visited ids.
  void add_epoch(const Roaring64Map& ids) {
    if (union_mode()) {
      set_ |= ids;
    } else {
      set_ -= ids;
    }
  }
  uint64_t unique(uint64_t n) const {
    return union_mode() ? set_.cardinality() : n - set_.cardinality();
  }

 private:
  long base_;
  Roaring64Map set_;
};

}  // namespace

std::vector<PositionRange> runs_of(const std::vector<uint64_t>& ascending) {
  std::vector<PositionRange> out;
  for (uint64_t v : ascending) {
    if (!out.empty() && out.back().end == v) {
      ++out.back().end;
    } else {
      out.push_back({v, v + 1});
    }
  }
  return out;
}

namespace {

using EpochVisits = std::map<uint64_t, std::vector<const Visit*>>;

// Step 1: the non-empty visits of each epoch, every one checked to lie inside its epoch.
Result<EpochVisits> visits_by_epoch(const CoverageInput& input, uint64_t length) {
  EpochVisits by_epoch;
  for (const auto& v : input.visits) {
    if (v.end > length || v.begin > v.end) {
      return internal_error("visit [" + std::to_string(v.begin) + ", " + std::to_string(v.end) +
                            ") of epoch " + std::to_string(v.epoch) + " outside the epoch's " +
                            std::to_string(length) + " positions");
    }
    if (v.end > v.begin) by_epoch[v.epoch].push_back(&v);
  }
  return by_epoch;
}

// The visited positions of a single-order epoch, folded into [0, n) and merged.
std::vector<PositionRange> visited_positions(const std::vector<const Visit*>& visits, uint64_t n) {
  std::vector<PositionRange> folded;
  for (const Visit* v : visits) fold_into(v->begin, v->end, n, &folded);
  return merge_ranges(std::move(folded));
}

bool single_order(const std::vector<const Visit*>& visits) {
  for (const Visit* v : visits) {
    if (v->order_key != visits.front()->order_key) return false;
  }
  return true;
}

// Step 2: how the overall union is counted (OverallSet), decided from interval arithmetic alone:
// subtracting from the single-order epoch that left the fewest samples unvisited, when those are
// fewer than the ids a union would hold; otherwise a union.
struct OverallPlan {
  bool ids_everywhere = true;  // every epoch's orders are known
  long base = -1;              // OverallSet's base epoch (its index), or -1 for a union
};

OverallPlan plan_overall(const CoverageInput& input, const EpochVisits& by_epoch, uint64_t n) {
  OverallPlan plan;
  uint64_t union_cost = 0;
  long base = -1;
  uint64_t base_never = 0;
  long index = 0;
  for (const auto& entry : by_epoch) {
    const std::vector<const Visit*>& visits = entry.second;
    plan.ids_everywhere = plan.ids_everywhere && all_orders_known(input, visits);
    uint64_t visited = 0;
    for (const Visit* v : visits) visited += v->end - v->begin;
    union_cost += std::min(visited, n);
    if (single_order(visits)) {
      const uint64_t never = n - ranges_size(visited_positions(visits, n));
      if (base < 0 || never < base_never) {
        base = index;
        base_never = never;
      }
    }
    ++index;
  }
  plan.base = base >= 0 && base_never < union_cost ? base : -1;
  return plan;
}

// Step 3 (subtracting): the candidates first, the base epoch's never-visited ids.
Status seed_overall(const CoverageInput& input, const EpochVisits& by_epoch, uint64_t n,
                    OverallSet* overall) {
  const std::vector<const Visit*>& visits = std::next(by_epoch.begin(), overall->base())->second;
  const std::vector<PositionRange> visited = visited_positions(visits, n);
  CKPT_ASSIGN_OR_RETURN(auto order, order_of(input, visits.front()->order_key));
  overall->seed_candidates(*order, complement(visited, n));
  return Status::ok();
}

// Step 4a: an epoch in one order, by interval arithmetic in position space. `overall`, when
// given, takes the epoch's visited ids.
Status cover_single_order(const CoverageInput& input, const CoverageOptions& options,
                          const std::vector<const Visit*>& visits, bool keep_strip,
                          OverallSet* overall, EpochCoverage* ec) {
  const uint64_t n = input.sampler.dataset_size;
  const std::vector<PositionRange> visited = visited_positions(visits, n);
  for (const auto& r : visited) ec->unique += r.end - r.begin;
  std::vector<PositionRange> never = complement(visited, n);
  ec->never_visited_count = n - ec->unique;
  CKPT_ASSIGN_OR_RETURN(auto order, order_of(input, visits.front()->order_key));
  if (order != nullptr) {
    ec->never_visited_ids = list_never_ids(*order, never, ec->never_visited_count, options.max_ids);
    if (overall != nullptr) overall->add_epoch(*order, visited, ec->unique);
  } else {
    ec->ids_known = false;
  }
  ec->never_visited_positions = std::move(never);
  if (keep_strip) ec->strip = strip_from_ranges(visited, n, options.strip_bins);
  return Status::ok();
}

// Step 4b: several known orders in one epoch (a reseeded torch_random generator): positions no
// longer name the same samples, so count ids.
Status cover_mixed_by_ids(const CoverageInput& input, const CoverageOptions& options,
                          const std::vector<const Visit*>& visits, bool keep_strip,
                          OverallSet* overall, EpochCoverage* ec) {
  const uint64_t n = input.sampler.dataset_size;
  ec->single_order = false;
  Roaring64Map ids;
  std::map<uint64_t, std::shared_ptr<const SampleOrder>> orders;
  for (const Visit* v : visits) {
    auto& order = orders[v->order_key];
    if (!order) {
      CKPT_ASSIGN_OR_RETURN(order, order_of(input, v->order_key));
    }
    for (uint64_t p = v->begin; p < v->end; ++p) ids.add(order->id_at(p % n));
  }
  ids.runOptimize();
  ec->unique = ids.cardinality();
  ec->never_visited_count = n - ec->unique;
  const uint64_t bins =
      keep_strip ? std::max<uint64_t>(1, std::min<uint64_t>(n, options.strip_bins)) : 0;
  std::vector<uint64_t> per_bin(bins, 0);
  for (auto it = ids.begin(); bins > 0 && it != ids.end(); ++it) {
    per_bin[static_cast<uint64_t>((unsigned __int128)(*it) * bins / n)]++;
  }
  ec->strip.resize(bins);
  for (uint64_t k = 0; k < bins; ++k) {
    const uint64_t lo = static_cast<uint64_t>((unsigned __int128)k * n / bins);
    const uint64_t hi = static_cast<uint64_t>((unsigned __int128)(k + 1) * n / bins);
    ec->strip[k] = hi > lo ? double(per_bin[k]) / double(hi - lo) : 0.0;
  }
  for (uint64_t id = 0; id < n && ec->never_visited_ids.size() < options.max_ids; ++id) {
    if (!ids.contains(id)) ec->never_visited_ids.push_back(id);
  }
  if (overall != nullptr) overall->add_epoch(ids);
  return Status::ok();
}

// Step 5: the numbers that follow from the counts, and the epoch's restart marks.
void finish_epoch(const CoverageInput& input, EpochCoverage* ec) {
  if (ec->exact) {
    ec->unique_max = ec->unique;
    ec->unique_expected = double(ec->unique);
  }
  ec->repeats = ec->visits - ec->unique;
  ec->fraction = double(ec->unique) / double(input.sampler.dataset_size);
  for (const auto& m : input.restarts) {
    if (m.epoch == ec->epoch) ec->restarts.push_back(m);
  }
}

// Step 4: one epoch's coverage, by whichever arithmetic its orders allow.
Result<EpochCoverage> cover_epoch(const CoverageInput& input, const CoverageOptions& options,
                                  uint64_t epoch, const std::vector<const Visit*>& visits,
                                  bool keep_strip, OverallSet* overall) {
  EpochCoverage ec;
  ec.epoch = epoch;
  for (const Visit* v : visits) ec.visits += v->end - v->begin;
  if (single_order(visits)) {
    CKPT_RETURN_IF_ERROR(cover_single_order(input, options, visits, keep_strip, overall, &ec));
  } else if (!all_orders_known(input, visits)) {
    ec.single_order = false;
    CKPT_RETURN_IF_ERROR(bound_mixed_epoch(input, visits, keep_strip, &ec));
  } else {
    CKPT_RETURN_IF_ERROR(cover_mixed_by_ids(input, options, visits, keep_strip, overall, &ec));
  }
  finish_epoch(input, &ec);
  return ec;
}

// Step 6, overall: a sample counts once if any epoch visited it.
void finish_overall(const OverallPlan& plan, bool count_overall, const OverallSet& overall,
                    CoverageReport* report) {
  const uint64_t n = report->dataset_size;
  if (report->epochs.empty()) {
    report->overall_unique = 0;
  } else if (!plan.ids_everywhere) {
    bound_overall(report);
  } else if (!count_overall) {
    report->overall_unique = report->epochs.front().unique;
  } else {
    report->overall_unique = overall.unique(n);
  }
  report->overall_fraction = double(report->overall_unique) / double(n);
  if (report->overall_exact) {
    report->overall_unique_max = report->overall_unique;
    report->overall_expected = double(report->overall_unique);
  }
}

}  // namespace

Result<CoverageReport> compute_coverage(const CoverageInput& input,
                                        const CoverageOptions& options) {
  const SamplerConfig& cfg = input.sampler;
  CKPT_RETURN_IF_ERROR(validate_sampler(cfg));
  const uint64_t n = cfg.dataset_size;

  CoverageReport report;
  report.dataset_size = n;
  report.sampler = sampler_kind_name(cfg.kind);
  report.epoch_length = cfg.epoch_length();
  report.steps_per_epoch = cfg.steps_per_epoch();

  CKPT_ASSIGN_OR_RETURN(EpochVisits by_epoch, visits_by_epoch(input, report.epoch_length));
  const OverallPlan plan = plan_overall(input, by_epoch, n);
  OverallSet overall(plan.base);
  const bool count_overall = plan.ids_everywhere && by_epoch.size() > 1;
  if (count_overall && !overall.union_mode()) {
    CKPT_RETURN_IF_ERROR(seed_overall(input, by_epoch, n, &overall));
  }
  const size_t epoch_count = by_epoch.size();
  size_t index = 0;
  for (const auto& [epoch, visits] : by_epoch) {
    const bool is_base = static_cast<long>(index) == overall.base();
    const bool keep_strip = epoch_count <= options.strip_epochs ||
                            index < options.strip_epochs / 2 ||
                            index >= epoch_count - options.strip_epochs / 2;
    ++index;
    // The base epoch's ids are the candidates already; every other epoch adds or subtracts its own.
    OverallSet* into = count_overall && !is_base ? &overall : nullptr;
    CKPT_ASSIGN_OR_RETURN(EpochCoverage ec,
                          cover_epoch(input, options, epoch, visits, keep_strip, into));
    report.total_visits += ec.visits;
    report.epochs.push_back(std::move(ec));
  }
  finish_overall(plan, count_overall, overall, &report);
  return report;
}

}  // namespace ckpt::analytics
