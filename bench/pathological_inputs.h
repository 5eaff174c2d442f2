// The pathological inputs of issue 27's cost cases, generated in memory: each made a command
// quadratic (or linear in a dataset's size) before. bench/cost_bench.cc times them with their
// bounds; tests/verify/cost_bounds_test.cc runs them under a ctest TIMEOUT. Header-only; each
// function returns the bytes of one file.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>

#include "analytics/lr/tb/tfrecord.h"

namespace ckpt::pathological {

// A Hugging Face trainer_state.json of about `bytes` bytes whose log_history is full of NaN (a
// run whose loss diverged), with NaN / Infinity inside strings too.
inline std::string hf_trainer_state_with_nans(size_t bytes) {
  std::string s =
      "{\"global_step\": 6, \"epoch\": 1.5, \"run_name\": \"runs/NaN-sweep-Infinity\",\n"
      " \"log_history\": [\n";
  for (long k = 0; s.size() < bytes; ++k) {
    char line[160];
    std::snprintf(line, sizeof line,
                  "  {\"epoch\": %ld.0, \"grad_norm\": NaN, \"learning_rate\": NaN, \"loss\": NaN, "
                  "\"step\": %ld},\n",
                  k, k);
    s += line;
  }
  s += "  {\"step\": -1, \"loss\": -Infinity, \"grad_norm\": Infinity}\n ]}\n";
  return s;
}

// A Lightning-style metrics.csv of about `bytes` bytes with `columns` LR columns
// ("lr-AdamW/pg0" ...), one row per step.
inline std::string csv_with_lr_columns(int columns, size_t bytes) {
  std::string s = "step";
  for (int c = 0; c < columns; ++c) s += ",lr-AdamW/pg" + std::to_string(c);
  s += "\n";
  for (long step = 0; s.size() < bytes; ++step) {
    s += std::to_string(step);
    for (int c = 0; c < columns; ++c) s += ",0.1";
    s += "\n";
  }
  return s;
}

// One TFRecord-framed TensorBoard Event holding one simple_value (tb_events.h's fields).
inline std::string tb_event_record(const std::string& tag, int64_t step, float value, double wall) {
  auto varint = [](uint64_t v) {
    std::string out;
    do {
      out.push_back(static_cast<char>((v & 0x7f) | (v > 0x7f ? 0x80 : 0)));
      v >>= 7;
    } while (v);
    return out;
  };
  auto bytes_field = [&](int number, const std::string& payload) {
    return varint(static_cast<uint64_t>(number) << 3 | 2) + varint(payload.size()) + payload;
  };
  std::string value_msg = bytes_field(1, tag);
  value_msg.push_back(static_cast<char>(2 << 3 | 5));
  value_msg.append(reinterpret_cast<const char*>(&value), 4);  // little-endian host
  std::string event;
  event.push_back(static_cast<char>(1 << 3 | 1));
  event.append(reinterpret_cast<const char*>(&wall), 8);
  event += varint(2 << 3 | 0) + varint(static_cast<uint64_t>(step));
  event += bytes_field(5, bytes_field(1, value_msg));
  auto u32 = [](uint32_t v) { return std::string(reinterpret_cast<const char*>(&v), 4); };
  const uint64_t len = event.size();
  const std::string len_bytes(reinterpret_cast<const char*>(&len), 8);
  return len_bytes + u32(analytics::tb::masked_crc32c(len_bytes)) + event +
         u32(analytics::tb::masked_crc32c(event));
}

// A TensorBoard event file of `records` LR records whose value alternates between two levels:
// every gap is a discontinuity.
inline std::string tb_alternating_lr(size_t records) {
  std::string s;
  s.reserve(records * 48);
  for (size_t i = 0; i < records; ++i) {
    s += tb_event_record("lr", static_cast<int64_t>(i), i % 2 ? 0.001f : 0.1f,
                         1.7e9 + static_cast<double>(i));
  }
  return s;
}

// An MLflow metric file (`timestamp value step` lines) of `lines` alternating LR values.
inline std::string mlflow_alternating_lr(size_t lines) {
  std::string s;
  s.reserve(lines * 32);
  for (size_t i = 0; i < lines; ++i) {
    char line[96];
    std::snprintf(line, sizeof line, "%llu %s %zu\n",
                  static_cast<unsigned long long>(1700000000000ull + i), i % 2 ? "0.001" : "0.1",
                  i);
    s += line;
  }
  return s;
}

// Our journal.jsonl: one start with a sampler over `dataset_size` samples, then `epochs` progress
// events of one sample each, one per epoch.
inline std::string journal_one_sample_per_epoch(uint64_t dataset_size, int epochs) {
  char start[400];
  std::snprintf(start, sizeof start,
                "{\"event\":\"start\",\"time\":0,\"step\":0,\"fresh\":true,\"grad_accum\":1,"
                "\"sampler\":{\"dataset_size\":%llu,\"seed\":9,\"shuffle\":true,"
                "\"drop_last\":false,\"world_size\":1,\"batch_size\":1,\"kind\":\"ckpt\"}}\n",
                static_cast<unsigned long long>(dataset_size));
  std::string s = start;
  for (int e = 0; e < epochs; ++e) {
    char line[200];
    std::snprintf(line, sizeof line,
                  "{\"event\":\"progress\",\"time\":%d,\"step\":%d,\"lr\":0.1,\"loss\":1,"
                  "\"epoch\":%d,\"position\":0,\"samples\":1}\n",
                  e + 1, e, e);
    s += line;
  }
  return s;
}

// A run spec of a torch RandomSampler run over `dataset_size` samples, two segments.
inline std::string torch_run_spec(uint64_t dataset_size) {
  char s[400];
  std::snprintf(s, sizeof s,
                "{\"dataset_size\": %llu, \"batch_size\": 8, \"world_size\": 1, \"grad_accum\": 1,"
                " \"sampler\": {\"kind\": \"torch_random\", \"seed\": 17, \"shuffle\": true,"
                " \"drop_last\": false},"
                " \"segments\": [{\"start_step\": 0, \"end_step\": 20},"
                " {\"start_step\": 20, \"end_step\": 40, \"loader_resumed\": false}]}\n",
                static_cast<unsigned long long>(dataset_size));
  return s;
}

}  // namespace ckpt::pathological
