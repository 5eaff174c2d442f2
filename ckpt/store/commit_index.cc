#include "ckpt/store/commit_index.h"

#include <map>

#include "ckpt/store/box_index.h"
#include "ckpt/store/box_tiling.h"

namespace ckpt::store {
namespace {

struct Gathered {
  TensorSpec spec;
  std::vector<BoxSource> boxes;
  int64_t first_rank = 0;  // the rank that described the tensor first, for messages
};

bool parse_placement(const std::string& name, Placement* out) {
  for (Placement p : {Placement::kReplicated, Placement::kSharded, Placement::kFlat}) {
    if (name == placement_name(p)) {
      *out = p;
      return true;
    }
  }
  return false;
}

}  // namespace

Result<std::optional<std::string>> build_commit_index(const std::vector<Manifest>& manifests,
                                                      int64_t step, const std::string& dir) {
  IndexBuilder builder(step);
  std::map<std::string, Gathered> tensors;  // by name: the index is deterministic
  bool any = false;
  for (const Manifest& m : manifests) {
    std::optional<uint32_t> file;
    for (const ManifestEntry& e : m.tensors) {
      if (!e.box) continue;
      any = true;
      if (!file) {
        CKPT_ASSIGN_OR_RETURN(file, builder.add_file(m.file));
      }
      Placement placement = Placement::kSharded;
      if (!parse_placement(e.box->placement, &placement)) {
        return invalid_argument(dir + "/" + m.file + ": tensor \"" + e.path +
                                "\": unknown placement \"" + e.box->placement + "\"");
      }
      auto [it, fresh] = tensors.try_emplace(e.path);
      Gathered& g = it->second;
      if (fresh) {
        g.spec = {e.path, e.dtype, e.box->global_shape, placement};
        g.first_rank = m.rank;
      } else if (g.spec.dtype != e.dtype || g.spec.shape != e.box->global_shape ||
                 g.spec.placement != placement) {
        return invalid_argument(dir + ": tensor \"" + e.path +
                                "\" is described differently by rank " +
                                std::to_string(g.first_rank) + " and rank " +
                                std::to_string(m.rank) + " (dtype, global shape or placement)");
      }
      CKPT_ASSIGN_OR_RETURN(uint32_t dataset, builder.intern(e.path));
      g.boxes.push_back({make_extent(e.box->offsets, e.shape), *file, dataset, e.offset, e.xxh3});
    }
  }
  if (!any) return std::optional<std::string>();
  for (auto& [name, g] : tensors) {
    CKPT_RETURN_IF_ERROR(builder.add_tensor(g.spec, g.boxes).with_context(dir));
  }
  GlobalIndex index = std::move(builder).finish();
  CKPT_RETURN_IF_ERROR(tiling_status(check_index_tiling(index), dir + ": commit refused"));
  return std::optional<std::string>(encode_index(index));
}

}  // namespace ckpt::store
