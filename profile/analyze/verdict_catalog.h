// What the analyzer says about each verdict beyond its numbers: a title, the next measurement to
// take, the fixes ordered by expected gain ÷ effort with their cost, and the fixes to decline
// (DOMAIN.md, "Fixes, and what to decline"). Static, immutable data; thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ckpt::profile {

// The closed set of verdicts. The names (verdict_name) are a contract: JSON "id", the text report,
// docs/cli.md. Append only.
enum class VerdictId : uint8_t {
  kHung,
  kInputBound,
  kCpuBoundLoader,
  kIoBoundLoader,
  kStraggler,
  kPeriodicStall,
  kCollectiveBound,
  kPageableH2D,
  kSequenceImbalance,
  kComputeBound,
  kGpuIdle,
};

// The one name table: "hung", "input_bound", ...
const char* verdict_name(VerdictId id);
std::optional<VerdictId> verdict_from_name(std::string_view name);

struct Fix {
  std::string what;
  std::string cost;  // "free", "small", "medium", "large", with what it costs
};

struct VerdictText {
  const char* id;
  const char* title;
  const char* next_measurement;
  std::vector<Fix> fixes;
  std::vector<std::string> decline;
};

// The smallest impact (share of measured step time explained) that makes a finding a verdict;
// below it the analyzer writes a note instead. The table is docs/cli.md's "Minimum shares":
// hung 0, input_bound 5%, cpu_bound_loader/io_bound_loader 0 (they refine an input_bound that
// passed), straggler 1%, periodic_stall 2%, collective_bound 10%, pageable_h2d 1%,
// sequence_imbalance 2%, compute_bound 80%, gpu_idle 20%.
double verdict_min_share(VerdictId id);

// The fixes to show for a verdict. For periodic_stall they follow the phase its evidence names as
// the cause (checkpoint: asynchronous saves; eval: evaluate less often; data_wait: the input
// pipeline's fixes; collective: the straggler's; compute phases: batch by length; unattributed:
// GC and logging); for every other verdict they are its catalog fixes.
std::vector<Fix> verdict_fixes(VerdictId id, std::string_view cause = "");

// The text for a verdict; nullptr for an unknown name.
const VerdictText* verdict_text(VerdictId id);
const VerdictText* verdict_text(const std::string& id);

constexpr int kNumVerdicts = 11;
extern const char* const kVerdictIds[kNumVerdicts];  // indexed by VerdictId

}  // namespace ckpt::profile
