// Reading a torch.distributed.checkpoint folder for a framework that lays its state dict out in
// its own way (Megatron-Core's torch_dist: flat "optimizer.state.exp_avg.<fqn>" keys, and the
// non-sharded part in a separate common.pt). The plain DCP reader (make_dcp_reader) is this with
// an empty layout.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "ckpt/base/status.h"
#include "verify/audit/view.h"
#include "verify/pickle/value.h"

namespace ckpt::verify {

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
// caller). NotFound/IoError/Corrupt as the DCP reader.
Status read_dcp_folder(const std::string& path, const ReadOptions& options, const DcpLayout& layout,
                       CheckpointView* view);

}  // namespace ckpt::verify
