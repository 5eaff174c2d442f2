// torch.distributed.checkpoint folders beyond the plain audit.
//
// 1. A DCP folder read for a framework that lays its state dict out in its own way (Megatron-Core's
// torch_dist: flat "optimizer.state.exp_avg.<fqn>" keys, and the non-sharded part in a separate
// common.pt): DcpLayout + read_dcp_folder. The plain DCP reader (make_dcp_reader) is this with an
// empty layout.
//
// 2. A torch.distributed.checkpoint folder as a value tree, for code that needs the tensors' bytes
// (verify/convert) rather than an audit: the nested state dict the DCP reader rebuilds from
// `.metadata` (tensor leaves are records whose `storage_key` is the flat key), plus where each
// chunk of each tensor lies in the `.distcp` files. Nothing is read but `.metadata` and the small
// non-tensor blobs; nothing is executed. The tree is owned by `owner`; read-only once returned.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "ckpt/base/status.h"
#include "ckpt/io/env.h"
#include "verify/formats/view.h"
#include "verify/pickle/value.h"

namespace ckpt::verify {

struct DcpChunk {
  std::vector<int64_t> offsets, sizes;  // the chunk's place in the whole tensor, per dimension
  std::string file;                     // .distcp file, relative to the folder
  int64_t offset = 0, length = 0;       // its bytes in that file: raw, or a torch.save blob
  // The bytes are the elements themselves (a tensor of a safetensors-format .distcp file), not a
  // torch.save blob.
  bool raw = false;
  // Written through DCP storage extensions (transform_descriptors, e.g. compression): the bytes
  // are not the tensor's as they are, and nothing here reads them.
  bool transformed = false;
};

struct DcpTree {
  const Value* root = nullptr;
  std::map<std::string, std::vector<DcpChunk>> chunks;  // flat key → chunks
  // What the DCP reader calls an error (chunks outside their shape, missing bytes, ...).
  std::vector<std::string> errors;
  std::shared_ptr<void> owner;
};

// On success the tree of `path` (a folder holding `.metadata`); NotFound/IoError when it cannot
// be opened, Corrupt when `.metadata` is not DCP metadata.
Result<DcpTree> open_dcp_tree(Env* env, const std::string& path);

struct DcpLayout {
  // The nested path of a flat state_dict key; empty = DCP's own (planner_data, else the dots).
  std::function<std::vector<std::string>(const std::string& fqn)> path_of;
  // A dict merged into the rebuilt state dict before detection (dicts merge key by key, other
  // values are added where the key is new). Owned by the caller; must outlive the call.
  const Value* common = nullptr;
  // Called with the rebuilt state dict once structural detection has filled `view`.
  std::function<void(const Value& root, CheckpointView* view)> after_detect;
};

// Reads `path` (a folder with .metadata) into `view` (path, format and contents.name set by the
// caller), through `env`. NotFound/IoError/Corrupt as the DCP reader.
Status read_dcp_folder(Env* env, const std::string& path, const ReadOptions& options,
                       const DcpLayout& layout, CheckpointView* view);

}  // namespace ckpt::verify
