// A torch.distributed.checkpoint folder as a value tree, for code that needs the tensors' bytes
// (verify/convert) rather than an audit: the nested state dict the DCP reader rebuilds from
// `.metadata` (tensor leaves are records whose `storage_key` is the flat key), plus where each
// chunk of each tensor lies in the `.distcp` files. Nothing is read but `.metadata` and the small
// non-tensor blobs; nothing is executed. The tree is owned by `owner`; read-only once returned.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "ckpt/base/status.h"
#include "verify/pickle/value.h"

namespace ckpt::verify {

struct DcpChunk {
  std::vector<int64_t> offsets, sizes;  // the chunk's place in the whole tensor, per dimension
  std::string file;                     // .distcp file, relative to the folder
  int64_t offset = 0, length = 0;       // its bytes in that file: raw, or a torch.save blob
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
Result<DcpTree> open_dcp_tree(const std::string& path);

}  // namespace ckpt::verify
