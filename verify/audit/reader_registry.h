// The format-reader plug-in point of the auditor.
//
// A FormatReader turns a path into a CheckpointView. `ckpt audit`/`inspect` ask every registered
// reader to `probe` the path and let the most confident one `read` it. The built-in readers
// (torch.save zip and legacy, safetensors, HF Trainer / Accelerate folders, DCP folders) are
// registered on first use; a reader living elsewhere (verify/ours: our HDF5 format) is registered
// explicitly by the program that wants it (verify::register_ours_reader(), called by cli/main.cc),
// before the first audit; lookup is thread-safe after that (read-only).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "ckpt/base/status.h"
#include "verify/audit/view.h"

namespace ckpt::verify {

class FormatReader {
 public:
  virtual ~FormatReader() = default;
  // Short stable name, also the view's `format` by convention ("torch.save", "ckpt-h5").
  virtual std::string name() const = 0;
  // How sure this reader is that `path` is its format: 0 = not mine, 10 = weak guess (extension),
  // 50 = structure matches (magic bytes, marker files), 100 = certain. Cheap: reads a few bytes.
  virtual int probe(const std::string& path) const = 0;
  // Reads the checkpoint. On failure: NotFound/IoError (cannot open → exit 66), Corrupt or
  // Unsupported (unreadable or not a checkpoint → exit 65), with one line naming the file.
  virtual Result<CheckpointView> read(const std::string& path,
                                      const ReadOptions& options) const = 0;
};

void register_reader(std::unique_ptr<FormatReader> reader);
// Every registered reader, built-ins first.
const std::vector<std::unique_ptr<FormatReader>>& registered_readers();

// Picks the reader with the highest probe score (> 0) and reads `path`. Corrupt "not a
// checkpoint" when no reader claims it; NotFound when the path does not exist.
Result<CheckpointView> read_checkpoint(const std::string& path, const ReadOptions& options);

}  // namespace ckpt::verify
