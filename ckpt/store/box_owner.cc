#include "ckpt/store/box_owner.h"

#include <algorithm>
#include <numeric>
#include <queue>
#include <utility>

namespace ckpt::store {

Result<OwnerAssignment> assign_owners(const std::vector<ReplicatedItem>& items,
                                      const OwnerOptions& options) {
  const size_t n = options.candidates.size();
  if (n == 0) return invalid_argument("assign_owners: no candidate rank");
  if (!options.initial_load.empty() && options.initial_load.size() != n) {
    return invalid_argument("assign_owners: " + std::to_string(options.initial_load.size()) +
                            " initial loads for " + std::to_string(n) + " candidates");
  }
  // Candidates sorted by rank, with their loads.
  std::vector<size_t> by_rank(n);
  std::iota(by_rank.begin(), by_rank.end(), 0);
  std::sort(by_rank.begin(), by_rank.end(),
            [&](size_t a, size_t b) { return options.candidates[a] < options.candidates[b]; });
  OwnerAssignment out;
  out.candidates.resize(n);
  out.final_load.resize(n);
  for (size_t i = 0; i < n; ++i) {
    out.candidates[i] = options.candidates[by_rank[i]];
    out.final_load[i] = options.initial_load.empty() ? 0 : options.initial_load[by_rank[i]];
    if (i > 0 && out.candidates[i] == out.candidates[i - 1]) {
      return invalid_argument("assign_owners: rank " + std::to_string(out.candidates[i]) +
                              " is a candidate twice");
    }
  }
  // Items largest first, ties by name: the order every rank sees.
  std::vector<size_t> order(items.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (items[a].bytes != items[b].bytes) return items[a].bytes > items[b].bytes;
    return items[a].name < items[b].name;
  });
  {
    std::vector<std::string_view> names;
    names.reserve(items.size());
    for (const ReplicatedItem& it : items) names.push_back(it.name);
    std::sort(names.begin(), names.end());
    auto dup = std::adjacent_find(names.begin(), names.end());
    if (dup != names.end()) {
      return invalid_argument("assign_owners: item \"" + std::string(*dup) + "\" listed twice");
    }
  }
  // Min-heap of (load, candidate position): the least-loaded, then the lowest rank.
  using Slot = std::pair<uint64_t, size_t>;
  std::priority_queue<Slot, std::vector<Slot>, std::greater<Slot>> heap;
  for (size_t i = 0; i < n; ++i) heap.emplace(out.final_load[i], i);
  out.owner.assign(items.size(), out.candidates[0]);
  for (size_t idx : order) {
    const uint64_t bytes = items[idx].bytes;
    if (bytes < options.small_bytes) {  // sorted largest first: every later item is small too
      out.final_load[0] += bytes;
      continue;
    }
    const Slot s = heap.top();
    heap.pop();
    out.owner[idx] = out.candidates[s.second];
    out.final_load[s.second] += bytes;
    heap.emplace(out.final_load[s.second], s.second);
  }
  return out;
}

}  // namespace ckpt::store
