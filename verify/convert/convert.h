// `ckpt convert`: a foreign checkpoint (torch.save file, Lightning .ckpt, Hugging Face Trainer or
// Accelerate folder, torch.distributed.checkpoint folder, safetensors file) becomes one committed
// ckpt checkpoint in a new run directory.
//
// Everything is read by the auditor's non-executing readers (verify/zip, verify/pickle,
// verify/formats): no pickle is ever run. The components are found by the audit's structural
// detection (verify/formats/detect.h) and written in torch's own state_dict layout, as the Python
// package stores them (docs/python.md, "Storage"): /model the model state dict (one tensor per
// name), /optimizer and /scheduler their state dicts (per-parameter state, param_groups,
// counters and hyperparameters as typed attributes), /rng the CPU (and CUDA) generator states,
// /train global_step and epoch, /extra everything else of the input in its place. Whatever cannot
// be represented (a pickled object, a set, a meta tensor, a file that holds no training state) is
// listed in `unmapped`, never silently dropped. The write goes through the store's commit
// protocol (store::write_rank, store::commit), so `ckpt verify` and `ckpt audit` read the result.
// Single-threaded; holds the whole state in memory while writing.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ckpt/base/status.h"
#include "ckpt/io/env.h"
#include "verify/formats/format_reader.h"

namespace ckpt::verify::convert {

struct MappedEntry {
  std::string path;  // in the input: "optimizer.pt", "complete.pt:optimizer", "lr_schedulers[0]"
  std::string to;    // in the output: "/optimizer", "/extra/loader"
  std::string as;    // what it was recognised as: "optimizer (Adam/AdamW, 4 params)"
};

struct UnmappedEntry {
  std::string path;
  std::string why;
};

struct ConvertReport {
  std::string input;
  CheckpointFormat format = CheckpointFormat::kTorchSave;  // as `ckpt audit` names it
  std::string output;
  std::string checkpoint;  // the step directory written, e.g. "step-000000000006"
  int64_t step = 0;
  size_t tensors = 0;
  uint64_t bytes = 0;  // tensor bytes written
  std::vector<std::string> components;
  std::vector<MappedEntry> mapped;
  std::vector<UnmappedEntry> unmapped;
};

struct ConvertOptions {
  bool progress = false;  // a progress bar on stderr while reading tensor bytes (a terminal only)
};

// On success OUT_DIR (absent or an empty directory) is a run directory with one committed
// checkpoint. Failures: InvalidArgument when OUT_DIR is not empty (never overwrites a run);
// NotFound/IoError when the input cannot be opened or the output written; Corrupt when the input
// is damaged or not a checkpoint; Unsupported for a format convert does not read (TorchScript,
// DeepSpeed, a ckpt run). Every message names the file. The input is read through `env` by the
// reader of `readers` that `ckpt audit` would pick; the output is written through `env`.
Result<ConvertReport> convert_checkpoint(Env* env, const ReaderSet& readers,
                                         const std::string& input, const std::string& out_dir,
                                         const ConvertOptions& options = {});

// The report as one JSON object (docs/cli.md, `ckpt convert --json`), and as text.
std::string report_json(const ConvertReport& r);
std::string report_text(const ConvertReport& r);

}  // namespace ckpt::verify::convert
