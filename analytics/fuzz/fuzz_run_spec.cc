// libFuzzer: the run-spec parser of `ckpt coverage --run-spec` and its replay; coverage itself
// only on small geometries (its cost is linear in the dataset and steps, by design).
#include <cstddef>
#include <cstdint>
#include <string>

#include "analytics/coverage/coverage.h"
#include "analytics/coverage/run_spec.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ckpt::analytics;
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto spec = parse_run_spec(text, "spec.json");
  if (!spec.is_ok()) return 0;
  int64_t steps = 0;
  for (const auto& s : spec->segments) steps += s.end_step - s.start_step;
  if (spec->sampler.dataset_size > 100000 || steps > 100000) return 0;
  auto input = replay_run(*spec);
  if (!input.is_ok()) return 0;
  CoverageOptions o;
  o.max_ids = 100;
  (void)compute_coverage(*input, o);
  return 0;
}
