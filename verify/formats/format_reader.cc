#include "verify/formats/format_reader.h"

#include <algorithm>

#include "verify/formats/path_hint.h"

namespace ckpt::verify {
namespace {

constexpr uint64_t kProbeBytes = 512;  // the most any probe reads (torch.save's sniff)

// Readers probe by reading; one that cannot read must not make "permission denied" or a failing
// disk look like "not a checkpoint": the path must open, and a file must yield the head the probes
// read (kProbeBytes). A FIFO or device passes (open_random refuses it as Corrupt, never waiting
// for a writer): the readers then say it is not a checkpoint.
Status check_can_open(Env* env, const std::string& path) {
  if (!env->exists(path)) {
    // exists() follows links; lstat tells a missing entry (or a link to nothing) from one whose
    // folder denies search (IoError, "Permission denied").
    CKPT_RETURN_IF_ERROR(env->entry_kind(path).status());
    return not_found(path + ": cannot open: No such file or directory");
  }
  if (env->is_dir(path)) return env->list_dir(path).status();
  auto f = env->open_random(path);
  if (!f.is_ok()) return f.status().code() == Code::kCorrupt ? Status::ok() : f.status();
  return (*f)->read_string(0, std::min<uint64_t>((*f)->size(), kProbeBytes)).status();
}

}  // namespace

ReaderSet& ReaderSet::add(std::unique_ptr<FormatReader> reader) {
  readers_.push_back(std::move(reader));
  return *this;
}

const FormatReader* ReaderSet::best(Env* env, const std::string& path) const {
  const FormatReader* best = nullptr;
  int best_score = 0;
  for (const auto& r : readers_) {
    const int s = r->probe(env, path);
    if (s > best_score) {
      best_score = s;
      best = r.get();
    }
  }
  return best;
}

Result<CheckpointView> ReaderSet::read(Env* env, const std::string& path,
                                       const ReadOptions& options) const {
  CKPT_RETURN_IF_ERROR(check_can_open(env, path));
  // A .distcp file opens as a torch.save zip when its first item is one: say what it is instead.
  if (const std::string piece = dcp_piece_hint(env, path); !piece.empty())
    return corrupt(path + ": not a checkpoint by itself: " + piece);
  const FormatReader* reader = best(env, path);
  if (reader == nullptr) {
    if (const std::string inside = checkpoints_inside(env, path); !inside.empty())
      return corrupt(path + ": not a checkpoint: " + inside);
    return corrupt(
        path +
        ": not a checkpoint: no reader recognises it (expected a torch.save file, "
        "safetensors, an HF/Accelerate folder, a DCP, DeepSpeed, Megatron or torchtune folder or "
        "a ckpt run)");
  }
  return reader->read(env, path, options);
}

std::string ReaderSet::checkpoints_inside(Env* env, const std::string& path) const {
  if (std::string dcp = dcp_parent_hint(env, path); !dcp.empty()) return dcp;
  return checkpoints_below_hint(
      env, path, [&](const std::string& p) { return best(env, p) != nullptr; }, "", 4);
}

}  // namespace ckpt::verify
