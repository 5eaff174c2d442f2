// Opening a foreign checkpoint for conversion: its value trees (route.h) and, for each, how to
// read its tensors' bytes (verify/formats/tensor_bytes.h). The format is the one `ckpt audit` would
// pick (ReaderSet::best of the program's readers); JSON files of a folder (trainer_state.json,
// config.json) become value trees too, so their counters and settings are typed attributes.
// The Source owns every file, pickle and buffer its trees point into.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "ckpt/base/status.h"
#include "verify/convert/convert.h"
#include "verify/convert/route.h"
#include "verify/formats/tensor_bytes.h"

namespace ckpt::verify::convert {

struct Source {
  CheckpointFormat format = CheckpointFormat::kTorchSave;
  std::vector<SourceTree> trees;
  std::vector<TensorFetch> fetch;       // one per tree
  std::vector<UnmappedEntry> unmapped;  // files of a folder that were not read
  std::vector<std::shared_ptr<void>> owners;
};

// NotFound when `path` does not exist; Corrupt when no reader claims it or it is damaged;
// Unsupported for formats convert does not read (TorchScript, DeepSpeed, ckpt's own runs). Every
// file is read through `env`.
Result<Source> open_source(Env* env, const ReaderSet& readers, const std::string& path);

}  // namespace ckpt::verify::convert
