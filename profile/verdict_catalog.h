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

// The text for a verdict; nullptr for an unknown name.
const VerdictText* verdict_text(VerdictId id);
const VerdictText* verdict_text(const std::string& name);

constexpr int kNumVerdicts = 11;
extern const char* const kVerdictIds[kNumVerdicts];  // indexed by VerdictId

}  // namespace ckpt::profile
