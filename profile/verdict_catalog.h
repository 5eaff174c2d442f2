// What the analyzer says about each verdict beyond its numbers: a title, the next measurement to
// take, the fixes ordered by expected gain ÷ effort with their cost, and the fixes to decline
// (DOMAIN.md, "Fixes, and what to decline"). Static, immutable data; thread-safe.
#pragma once

#include <string>
#include <vector>

namespace ckpt::profile {

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

// The text for a verdict id (one of kVerdictIds); nullptr for an unknown id.
const VerdictText* verdict_text(const std::string& id);

constexpr int kNumVerdicts = 11;
extern const char* const kVerdictIds[kNumVerdicts];

}  // namespace ckpt::profile
