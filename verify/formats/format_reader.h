// The format-reader seam of the auditor: a FormatReader turns a path into a CheckpointView, and a
// ReaderSet is the explicit list of readers a program audits with.
//
// There is no global registry. The program builds its set once (cli/main.cc: the built-in foreign
// readers of verify/formats/builtin_readers.h, then verify/ours' reader of our HDF5 format) and
// hands it, with the Env every byte is read through, to what audits, inspects, diffs, converts or
// reports. `ckpt audit`/`inspect` ask every reader of the set to `probe` the path and let the most
// confident one `read` it. Readers are stateless; a set is read-only once built, so it may be
// shared by threads.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "ckpt/base/status.h"
#include "ckpt/io/env.h"
#include "verify/formats/view.h"

namespace ckpt::verify {

class FormatReader {
 public:
  virtual ~FormatReader() = default;
  // The format this reader claims at probe time; read() may refine it in the view (a torch.save
  // file that turns out to be Lightning, an HF folder that is Accelerate's).
  virtual CheckpointFormat format() const = 0;
  // How sure this reader is that `path` is its format: 0 = not mine, 10 = weak guess (extension),
  // 50 = structure matches (magic bytes, marker files), 100 = certain. Cheap: reads a few bytes,
  // all through `env`.
  virtual int probe(Env* env, const std::string& path) const = 0;
  // Reads the checkpoint through `env`. On failure: NotFound/IoError (cannot open or read → exit
  // 66), Corrupt or Unsupported (unreadable or not a checkpoint → exit 65), with one line naming
  // the file.
  virtual Result<CheckpointView> read(Env* env, const std::string& path,
                                      const ReadOptions& options) const = 0;
};

class ReaderSet {
 public:
  ReaderSet() = default;
  ReaderSet(ReaderSet&&) = default;
  ReaderSet& operator=(ReaderSet&&) = default;

  // Adds a reader; on equal probe scores the one added first wins.
  ReaderSet& add(std::unique_ptr<FormatReader> reader);
  const std::vector<std::unique_ptr<FormatReader>>& readers() const { return readers_; }

  // The reader with the highest probe score (> 0) for `path`; null when none claims it.
  const FormatReader* best(Env* env, const std::string& path) const;

  // Picks best(env, path) and reads `path` through `env`. NotFound when the path does not exist,
  // IoError when it cannot be opened (so "permission denied" never reads as "not a checkpoint"),
  // Corrupt "not a checkpoint" when no reader claims it or it is a piece of a DCP folder (a
  // `.metadata` or `.distcp` file), saying what to pass instead where it can
  // (verify/formats/path_hint.h).
  Result<CheckpointView> read(Env* env, const std::string& path, const ReadOptions& options) const;

  // For a path no reader claims: the checkpoints below it, and which to pass (DCP folders, or a
  // run's output folder whose entries some reader claims, up to four levels down: an HF Trainer's
  // checkpoint-N, Lightning's lightning_logs/version_0/checkpoints/*.ckpt, Accelerate's
  // checkpoints/checkpoint_N); "" when it holds none (verify/formats/path_hint.h).
  std::string checkpoints_inside(Env* env, const std::string& path) const;

 private:
  std::vector<std::unique_ptr<FormatReader>> readers_;
};

}  // namespace ckpt::verify
