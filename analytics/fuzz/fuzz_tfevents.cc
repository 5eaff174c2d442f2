// libFuzzer: TensorBoard event files — TFRecord framing, the protobuf wire reader, the Event /
// Summary / TensorProto walk — and the LR series and analysis built on what they return.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "analytics/lr/lr_analysis.h"
#include "analytics/lr/lr_foreign.h"
#include "analytics/lr/lr_log.h"
#include "analytics/lr/tb/tb_events.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ckpt::analytics;
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  auto file = tb::parse_event_file(bytes, "fuzz.tfevents");
  auto log = scalar_log_from_event_bytes(bytes, "fuzz.tfevents");
  if (file.is_ok() != log.is_ok()) __builtin_trap();
  if (!log.is_ok()) return 0;
  // Every scalar read must come from inside the input: a value count above the record count
  // times the values a record can hold would mean reads past a record's end.
  if (file->scalars.size() > size) __builtin_trap();
  auto series = lr_series_from_log(*log, "");
  if (series.is_ok()) {
    for (const auto& s : *series) (void)analyze_lr(s, {});
  }
  return 0;
}
