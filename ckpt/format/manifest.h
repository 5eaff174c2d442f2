// The tensor manifest of one rank file (docs/format.md §4) and the commit record of a checkpoint
// (§5): pure encode/decode and validation. Decoding treats the input as untrusted: every field is
// type-checked, every extent bounds-checked, and errors name the file and the offending entry.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ckpt/base/status.h"
#include "ckpt/format/dtype.h"
#include "ckpt/format/tree.h"

namespace ckpt {

constexpr uint64_t kTensorAlignment = 4096;

struct ManifestEntry {
  std::string path;  // "/model/fc1.weight"
  DType dtype = DType::kFloat32;
  std::vector<int64_t> shape;
  uint64_t offset = 0;
  uint64_t nbytes = 0;
  uint64_t xxh3 = 0;
  // A piece of a global tensor (format version 2): "box": {"global_shape", "offsets",
  // "placement"} in the JSON. Only boxes this rank writes are listed (owner is -1).
  std::optional<BoxOf> box;
  // Chunk digests (docs/format.md §4): XXH3-64 of each consecutive `chunk_bytes` of the tensor's
  // bytes (the last one shorter), so that a reader of part of the tensor (a rank restoring at
  // another world size) checks what it reads without reading the rest. "chunks": {"bytes",
  // "xxh3": [...]} in the JSON; absent (chunk_bytes 0) for tensors of one chunk or less.
  uint64_t chunk_bytes = 0;
  std::vector<uint64_t> chunk_xxh3;
};

// The chunk size writers use for boxes larger than it (a multiple of kTensorAlignment).
constexpr uint64_t kBoxChunkBytes = 1u << 20;

// XXH3-64 of each consecutive `chunk_bytes` of [data, data + nbytes), the last one shorter.
std::vector<uint64_t> chunk_digests(const void* data, uint64_t nbytes, uint64_t chunk_bytes);

struct Manifest {
  std::string file;  // "rank-00000.h5"
  uint64_t file_bytes = 0;
  int64_t step = 0;
  int64_t rank = 0;
  int64_t world_size = 1;
  uint64_t attrs_xxh3 = 0;
  // Whole-file XXH3-64 of `file`, computed while it was written; absent in manifests written
  // before it existed (commit() then hashes the file itself).
  std::optional<uint64_t> file_xxh3;
  // The region digest of `file` (ckpt/format/regions.h), computed while it was written; absent
  // in manifests written before it existed.
  std::optional<uint64_t> regions_xxh3;
  std::vector<ManifestEntry> tensors;
};

std::string encode_manifest(const Manifest& m);
// `where` names the manifest in errors. Checks types and the rules that need no other file:
// alignment, nbytes = numel × dtype size, offset + nbytes ≤ file_bytes, no overlap, unique paths.
Result<Manifest> decode_manifest(const std::string& text, const std::string& where);

struct CommitFile {
  std::string name;
  uint64_t bytes = 0;
  uint64_t xxh3 = 0;
  // A rank file's region digest (ckpt/format/regions.h), from its manifest; absent for
  // manifests and for rank files written before it existed.
  std::optional<uint64_t> regions_xxh3 = std::nullopt;
};

struct CommitRecord {
  int64_t step = 0;
  int64_t world_size = 1;
  std::string time;  // ISO 8601 UTC
  std::vector<std::string> components;
  std::vector<CommitFile> files;
};

std::string encode_commit(const CommitRecord& c);
// Verifies the record's own hash; a damaged record is kCorrupt.
Result<CommitRecord> decode_commit(const std::string& text, const std::string& where);

// The steps a checkpoint can have, [0, kMaxStep]: a step directory's name holds 12 digits
// (docs/format.md §1). Every writer checks a step with check_step before it writes anything.
constexpr int64_t kMaxStep = 999'999'999'999;
// invalid_argument "step S is out of range: a checkpoint's step is in [0, 999999999999]" unless
// 0 <= step <= kMaxStep.
Status check_step(int64_t step);

// "step-000000012000" (step in [0, kMaxStep]: check_step)
std::string step_dir_name(int64_t step);
// Parses "step-<12 digits>"; false otherwise.
bool parse_step_dir_name(const std::string& name, int64_t* step);
// "rank-00003.h5", "rank-00003.manifest.json"
std::string rank_file_name(int64_t rank);
std::string rank_manifest_name(int64_t rank);

}  // namespace ckpt
