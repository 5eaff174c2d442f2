// Export of a ckpt checkpoint as consolidated safetensors files (`ckpt export --to safetensors`):
// every model tensor whole, as a Hugging Face model folder holds it, and with `with_optimizer` the
// optimizer's per-parameter state as a second set of files.
//
// Sources: a sharded checkpoint (format version 2, its INDEX listed in COMMIT.json) — each
// global tensor is assembled from its boxes (docs/format.md §8), one tensor at a time, each box
// read straight into its place with one positioned read per contiguous run and its XXH3 checked
// against the index before the tensor is written; tensors the index does not list come from
// rank 0's file — or a plain version-1 checkpoint (rank 0's file, each tensor's manifest XXH3
// checked). Memory: the tensor being written and one of its boxes, never two tensors.
//
// Output, into `out_dir` (created when missing): `model.safetensors`, or when the tensors are
// above `max_shard_bytes` `model-00001-of-0000N.safetensors` ... plus
// `model.safetensors.index.json`
// ({"metadata": {"total_size"}, "weight_map": {name: file}}), tensors filled in name order and a
// new file begun when the next tensor would pass the limit (one larger tensor gets a file of its
// own), as transformers' save_pretrained does; the same with `optimizer` for the optimizer's
// state. Every file is written under a temporary name, fsynced, and renamed only once every file
// of the export is complete, so a failed export leaves no output file behind.
//
// Tensor names: the model's as the training code named them (`/model/layers.0.weight` →
// `layers.0.weight`); the optimizer's as the flat keys of torch's state_dict (`/optimizer/state/
// 0.weight/exp_avg` → `state.0.weight.exp_avg`). Not thread-safe; no torch.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ckpt/base/status.h"
#include "ckpt/io/env.h"

namespace ckpt::verify {

struct ExportOptions {
  std::string path;     // a run directory (its newest committed checkpoint) or a step directory
  std::string out_dir;  // where the files go
  bool with_optimizer = false;
  uint64_t max_shard_bytes = 5'000'000'000;  // "5GB", as Hugging Face counts it
};

struct ExportedFile {
  std::string name;  // "model-00001-of-00002.safetensors", "model.safetensors.index.json"
  uint64_t bytes = 0;
  size_t tensors = 0;  // 0 for an index
};

struct ExportReport {
  std::string step_dir;
  int format_version = 1;  // 2 when assembled from an INDEX
  std::vector<ExportedFile> files;
  size_t tensors = 0;
  uint64_t tensor_bytes = 0;
  uint64_t boxes_checked = 0;  // boxes (version 2) or tensors (version 1) whose XXH3 was checked
  // The wrapper prefix every model tensor's name had and the export dropped ("_orig_mod." of
  // torch.compile, "module." of DDP, or a chain of them; "" when none).
  std::string dropped_prefix;
};

// Why an export failed: the caller maps each to its exit code.
enum class ExportFailure {
  kNone,
  kInput,    // the path is not a readable ckpt checkpoint (NotFound, IoError, Corrupt, ...)
  kDamaged,  // a file the checkpoint lists is missing or does not match its hash, or the
             // index is damaged or its boxes do not tile: nothing was written
  kOutput,   // out_dir or a file in it cannot be written
};

// On success the report lists every file written. On failure the Status names the file (and
// tensor, box and element ranges) concerned, `failure` says which kind, and no output file
// exists under its final name (temporary files are removed).
Status export_safetensors(Env* env, const ExportOptions& options, ExportReport* report,
                          ExportFailure* failure);

// "5GB" → 5e9, "500MB", "10KB", "2GiB" → 2^31, "123" → bytes; a trailing lower-case "b" counts
// bits ("8Gb" → 1e9), as transformers' convert_file_size_to_int reads them. InvalidArgument for
// anything else, zero included.
Result<uint64_t> parse_shard_size(const std::string& text);

}  // namespace ckpt::verify
