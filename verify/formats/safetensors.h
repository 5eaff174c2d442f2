// safetensors: header parsing and validation (8-byte little-endian length, JSON header, raw
// bytes), following huggingface/safetensors' Metadata::validate: known dtypes, byte lengths that
// match shapes, tensors contiguous from offset 0 without gaps or overlaps, and a buffer that ends
// exactly at the end of the file. Only the header is read unless a caller reads tensor bytes.
// Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "ckpt/base/status.h"
#include "ckpt/io/env.h"
#include "verify/formats/view.h"

namespace ckpt::verify {

struct SafetensorsTensor {
  std::string name;
  AnyDType dtype;        // "float32", "bfloat16", ...; other: "float4_e2m1", ...
  std::string st_dtype;  // safetensors spelling: "F32"
  size_t element_size = 0;
  std::vector<int64_t> shape;
  uint64_t begin = 0, end = 0;  // relative to the data buffer
};

struct SafetensorsHeader {
  uint64_t header_size = 0;
  uint64_t data_start = 0;                 // 8 + header_size
  std::vector<SafetensorsTensor> tensors;  // sorted by offset
  std::map<std::string, std::string> metadata;
};

constexpr uint64_t kSafetensorsMaxHeader = 100'000'000;

// Parses and validates the header of `file`. Corrupt with the file name on any violation.
Result<SafetensorsHeader> parse_safetensors(const RandomAccessFile& file);
// The JSON header text of the safetensors data that starts at `offset` of `file` (its 8-byte
// little-endian length, then the text), not parsed. Corrupt, naming `where`, when fewer than 8
// bytes follow `offset` or the length runs past the file or the 100 MB limit.
Result<std::string> read_safetensors_header_text(const RandomAccessFile& file, uint64_t offset,
                                                 const std::string& where);
// Same, from the header JSON text and the total file size (for tests and fuzzing).
Result<SafetensorsHeader> parse_safetensors_header(const std::string& json_text, uint64_t file_size,
                                                   const std::string& where);

// Adds the file's tensors to view->model (merging with earlier shards), its inspect node, and
// with options.deep NaN/Inf findings, reading `path` through `env`. Returns bytes read.
// A format that holds weights only: every other audited component is a format gap, `why` saying
// so, and the optimizer's and scheduler's evidence.
void mark_weights_only(const std::string& why, CheckpointView* view);

Result<uint64_t> add_safetensors_to_view(Env* env, const std::string& path,
                                         const std::string& label, CheckpointView* view,
                                         const ReadOptions& options);

}  // namespace ckpt::verify
