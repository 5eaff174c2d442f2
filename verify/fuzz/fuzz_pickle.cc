// libFuzzer: the non-executing unpickler, then detection, Megatron's state mapping and per-rank
// check, and the inspect tree on what it built.
#include <cstddef>
#include <cstdint>
#include <string>

#include "verify/audit/rules.h"
#include "verify/formats/detect.h"
#include "verify/formats/megatron_state.h"
#include "verify/pickle/pickle_reader.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ckpt::verify;
  std::string bytes(reinterpret_cast<const char*>(data), size);
  PickleLimits limits;
  limits.max_values = 200000;  // keep each run fast; the caps are what is under test
  // The scanner's lenient pass: uses recorded up to any error, offsets inside the input.
  PickleLimits lenient = limits;
  lenient.lenient = true;
  PickleScan scan = scan_pickle(bytes, "fuzz.pkl", lenient);
  for (const auto& u : scan.doc->uses) {
    if (u.offset >= size) __builtin_trap();
  }
  auto doc = read_pickle(bytes, "fuzz.pkl", limits);
  if (!doc.is_ok()) return 0;
  CheckpointView view;
  detect_components(*(*doc)->root, DetectContext{"fuzz.pkl", nullptr}, &view);
  add_megatron_state(*(*doc)->root, "fuzz.pkl", &view);
  check_megatron_ranks({{"a", (*doc)->root, ""}, {"b", (*doc)->root, ""}}, &view);
  AuditReport r = apply_rules(view, {});
  size_t budget = 5000;
  InspectNode n = inspect_value(*(*doc)->root, "root", &budget);
  return r.components.empty() + static_cast<int>(n.children.size() > 1u << 30);
}
