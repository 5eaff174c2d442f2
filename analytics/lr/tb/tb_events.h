// Scalars from TensorBoard event files (what torch.utils.tensorboard, TF2, Hugging Face Trainer
// and Lightning's TensorBoardLogger write). An event file is TFRecord-framed (tfrecord.h); each
// record is an `Event` message, of which these fields are read (numbers from TensorFlow's
// event.proto / summary.proto / tensor.proto, the wire format's public contract):
//
//   Event:         1 wall_time (double), 2 step (int64), 5 summary (Summary)
//   Summary:       1 value (repeated Value)
//   Summary.Value: 1 tag (string), 2 simple_value (float), 8 tensor (TensorProto),
//                  9 metadata (SummaryMetadata: 1 plugin_data { 1 plugin_name })
//   TensorProto:   1 dtype (DT_FLOAT = 1, DT_DOUBLE = 2), 4 tensor_content (raw little-endian),
//                  5 float_val (packed or not), 6 double_val (packed or not)
//
// A value is a scalar when it has a simple_value, or a float/double tensor holding exactly one
// element (TF2 and `add_scalar(new_style=True)` write that form; histograms, images and text are
// skipped). Everything else in the file is ignored.
//
// Pure functions over bytes; thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "ckpt/base/status.h"

namespace ckpt::analytics::tb {

struct ScalarValue {
  std::string tag;
  int64_t step = 0;
  double wall_time = 0;  // seconds since the epoch
  double value = 0;
};

struct EventFile {
  std::string path;
  double first_wall_time = 0;  // of the first event (the file_version record), 0 if none
  uint64_t events = 0;
  std::vector<ScalarValue> scalars;  // in file order
  std::string torn;                  // non-empty when the last record was torn (tfrecord.h)
};

// On failure corrupt("<path>: ...") for a CRC mismatch before the end of the file or an Event
// record that is not a well-formed message.
Result<EventFile> parse_event_file(std::string_view bytes, const std::string& path);

}  // namespace ckpt::analytics::tb
