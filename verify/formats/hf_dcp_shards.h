// The folder torch.distributed.checkpoint's HuggingFaceStorageWriter(save_distributed=True)
// writes without consolidation (format `dcp-hf-shards`): one safetensors file per rank and model
// file, `shard-<RANK>-model-<K>-of-<N>.safetensors` (numbers zero-padded to 5 digits, ranks and K
// from 1), each tensor in it one chunk of a global tensor placed at the offsets its
// `__metadata__` DCP_SHARDING_INFO gives, and no .metadata. Private to the reader
// (hf_dcp_shards_reader.cc); the pieces are:
//
//   1. read_shard_folder: every *.safetensors file's header, as torch's HuggingFaceStorageReader
//      reads the folder (every such file; a file without DCP_SHARDING_INFO holds whole tensors at
//      offset 0), into chunks; each global tensor's shape is what that reader infers, per
//      dimension the largest chunk offset + size. A damaged file's chunks are lost (its header,
//      when it still parses, says what they were).
//   2. check_shard_folder: the present chunks of every tensor must tile its shape
//      (store::check_tensor_tiling) and agree on the dtype; the names must form the full grid of
//      ranks 1..R x files 1..N (R the highest rank named), and a hole in it is named with what
//      the other ranks keep in that file.
// Pure functions over an Env; thread-compatible.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "ckpt/base/status.h"
#include "ckpt/io/env.h"
#include "verify/formats/safetensors.h"
#include "verify/formats/view.h"

namespace ckpt::verify::hf_shards {

// rank, k and n of "shard-00002-model-00001-of-00002.safetensors"; nullopt for other names.
struct ShardName {
  int64_t rank = 0, k = 0, n = 0;
};
std::optional<ShardName> parse_shard_name(const std::string& name);

struct Chunk {
  std::string fqn;
  size_t file = 0;  // index into ShardFolder::files
  std::vector<int64_t> offsets, sizes;
  AnyDType dtype;
  size_t element_size = 0;
  uint64_t begin = 0, length = 0;  // its bytes in the file (absolute offset)
  bool present = false;            // false: its file is damaged, the bytes are lost
};

struct ShardFile {
  std::string name;
  std::optional<ShardName> shard;  // nullopt: a *.safetensors file of another name
  std::optional<SafetensorsHeader> header;
  std::string damage;    // non-empty: why its tensors cannot be read
  bool sharding = true;  // its __metadata__ has DCP_SHARDING_INFO
  uint64_t bytes_read = 0;
};

struct GlobalTensor {
  AnyDType dtype;  // the first chunk's, as torch's reader takes it
  size_t element_size = 0;
  std::vector<int64_t> shape;
  std::vector<size_t> chunks;  // indices into ShardFolder::chunks, in file order
  bool ranks_agree = true;     // every chunk has as many dimensions as the first
  std::string problem;         // the first tiling or dtype error (check_shard_folder); "" if none
};

struct ShardFolder {
  std::vector<ShardFile> files;  // sorted by name
  std::vector<Chunk> chunks;
  std::map<std::string, GlobalTensor> tensors;
  std::vector<ReaderFinding> findings;  // errors and notes met while reading
};

// A finding about the model (an error makes it inconsistent).
void add(ShardFolder* folder, Severity severity, const std::string& message);

// Step 1. NotFound / IoError when a file cannot be opened or read; damage is a finding.
Result<ShardFolder> read_shard_folder(Env* env, const std::string& dir);

// Step 2: appends its findings to folder->findings. Returns whether every tensor tiles.
bool check_shard_folder(ShardFolder* folder);

}  // namespace ckpt::verify::hf_shards
