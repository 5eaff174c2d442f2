// libFuzzer: the text LR log readers of `ckpt lr` — CSV (Lightning's metrics.csv too), JSONL,
// trainer_state.json and MLflow metric files — and the analysis on what they return. The first
// byte picks the reader.
#include <cstddef>
#include <cstdint>
#include <string>

#include "analytics/lr/lr_analysis.h"
#include "analytics/lr/lr_foreign.h"
#include "analytics/lr/lr_input.h"
#include "analytics/lr/lr_log.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ckpt::analytics;
  if (size == 0) return 0;
  const std::string text(reinterpret_cast<const char*>(data) + 1, size - 1);
  ckpt::Result<LrSeries> one = ckpt::corrupt("unset");
  switch (data[0] % 4) {
    case 0:
      one = lr_from_csv_text(text, "fuzz.csv");
      break;
    case 1:
      one = lr_from_jsonl_text(text, "fuzz.jsonl");
      break;
    case 2:
      one = lr_from_trainer_state_text(text, "trainer_state.json");
      break;
    default: {
      auto log = scalar_log_from_mlflow_text(text, "metrics/lr", "lr");
      if (log.is_ok()) {
        auto series = lr_series_from_log(*log, "");
        if (series.is_ok()) one = std::move(series->front());
      }
    }
  }
  if (one.is_ok()) {
    for (size_t i = 1; i < one->points.size(); ++i) {
      if (one->points[i - 1].step >= one->points[i].step) __builtin_trap();
    }
    (void)analyze_lr(*one, {});
  }
  return 0;
}
