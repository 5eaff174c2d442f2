#include "verify/formats/path_hint.h"

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <vector>

namespace ckpt::verify {
namespace {

constexpr size_t kMaxLooked = 2000;  // entries looked at in all (is_dir, .metadata), both levels
constexpr size_t kMaxNamed = 6;      // DCP folders named in a message

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

bool is_dcp_folder(Env* env, const std::string& dir) {
  return env->is_dir(dir) && env->exists(path_join(dir, ".metadata"));
}

// The number a name ends with ("step-12" → 12), or -1 when it ends with none.
int64_t trailing_number(const std::string& name) {
  size_t k = name.size();
  while (k > 0 && std::isdigit(static_cast<unsigned char>(name[k - 1])) != 0) --k;
  const size_t digits = name.size() - k;
  if (digits == 0 || digits > 18) return -1;
  return std::stoll(name.substr(k));
}

// The entries below `top`/`rel` (as "rel/name") that are checkpoints, up to
// `max_depth` levels down (a checkpoint is not looked into); `budget` counts down the entries
// looked at.
void find_below(Env* env, const std::string& top, const std::string& rel, int depth, int max_depth,
                const IsCheckpoint& is_checkpoint, size_t* budget, std::vector<std::string>* out) {
  auto names = env->list_dir(rel.empty() ? top : path_join(top, rel));
  if (!names.is_ok()) return;
  for (const std::string& name : *names) {
    if (*budget == 0) return;
    --*budget;
    if (name.empty() || name[0] == '.') continue;
    const std::string sub = rel.empty() ? name : path_join(rel, name);
    const std::string full = path_join(top, sub);
    if (is_checkpoint(full)) {
      out->push_back(sub);
    } else if (depth < max_depth && env->is_dir(full)) {
      find_below(env, top, sub, depth + 1, max_depth, is_checkpoint, budget, out);
    }
  }
}

}  // namespace

std::string dcp_piece_hint(Env* env, const std::string& path) {
  if (env->is_dir(path)) return "";
  const std::string name = path_basename(path);
  const std::string dir = path_dirname(path);
  if (name == ".metadata") {
    return "the metadata file of a torch.distributed.checkpoint (DCP) folder; pass the folder (" +
           dir + ")";
  }
  if (!ends_with(name, ".distcp")) return "";
  std::string hint =
      "a data file of a torch.distributed.checkpoint (DCP) folder; pass the folder holding it (" +
      dir + ")";
  if (!env->exists(path_join(dir, ".metadata"))) hint += ", which needs its .metadata file";
  return hint;
}

std::string checkpoints_below_hint(Env* env, const std::string& path,
                                   const IsCheckpoint& is_checkpoint, const std::string& kind,
                                   int max_depth) {
  if (!env->is_dir(path)) return "";
  std::vector<std::string> found;  // relative paths
  size_t budget = kMaxLooked;
  find_below(env, path, "", 1, max_depth, is_checkpoint, &budget, &found);
  if (found.empty()) return "";
  // Oldest first when every name ends with a step ("step-10" after "step-9"), else by name.
  const bool numbered = std::all_of(found.begin(), found.end(),
                                    [](const std::string& f) { return trailing_number(f) >= 0; });
  std::sort(found.begin(), found.end(), [numbered](const std::string& a, const std::string& b) {
    const int64_t na = numbered ? trailing_number(a) : 0, nb = numbered ? trailing_number(b) : 0;
    return na != nb ? na < nb : a < b;
  });
  std::string names;
  for (size_t i = 0; i < found.size(); ++i) {
    if (found.size() > kMaxNamed && i >= 2 && i + 3 < found.size()) {  // the oldest two, newest 3
      if (i == 2) names += ", ...";
      continue;
    }
    names += (i ? ", " : "") + found[i];
  }
  const std::string& newest = found.back();
  std::string hint = "it holds " + std::to_string(found.size()) + " " +
                     (kind.empty() ? "" : kind + " ") + "checkpoint" +
                     (found.size() == 1 ? "" : "s") + " (" + names + "); pass ";
  if (found.size() == 1) return hint + "it: " + path_join(path, newest);
  return hint + "one of them, e.g. " + path_join(path, newest) + (numbered ? " (the newest)" : "");
}

std::string dcp_parent_hint(Env* env, const std::string& path) {
  if (is_dcp_folder(env, path)) return "";
  return checkpoints_below_hint(
      env, path, [env](const std::string& full) { return is_dcp_folder(env, full); }, "DCP", 2);
}

}  // namespace ckpt::verify
