#include "verify/formats/library_layouts.h"

#include <cmath>
#include <sstream>

#include "verify/formats/knowledge.h"

namespace ckpt::verify {
namespace {

// mmengine's Runner.save_checkpoint: {meta {epoch, iter, seed, ...}, state_dict, message_hub
// {runtime_info {max_epochs, max_iters, ...}}, optimizer, param_schedulers}.
void mmengine(const Value& root, const std::string& source, CheckpointView* view) {
  const Value* meta = root.get("meta");
  const Value* hub = root.get("message_hub");
  if (meta == nullptr || meta->kind != Kind::kDict || hub == nullptr) return;
  const auto iter = layout_int(meta, "iter");
  const auto epoch = layout_int(meta, "epoch");
  const auto seed = layout_int(meta, "seed");
  const Value* hs = layout_settings(hub);
  const Value* info = layout_settings(hs != nullptr ? hs->get("runtime_info") : nullptr);
  const auto max_iters = layout_int(info, "max_iters");
  const auto max_epochs = layout_int(info, "max_epochs");
  if (!iter || !epoch) return;
  const std::string p = source_prefix(source);
  const std::string seeded =
      seed ? "meta.seed " + std::to_string(*seed) + " seeds the sampler again"
           : "no meta.seed: the sampler order is only the same if the config fixes its seed";
  if (!view->rng_cpu.found && view->format_gaps.count(AuditComponent::kRngCpu) == 0) {
    view->format_gaps[AuditComponent::kRngCpu] =
        "mmengine's Runner saves no generator state" +
        (seed ? ", only meta.seed " + std::to_string(*seed) : std::string()) +
        ": the resumed run reseeds, so dropout and augmentation do not continue the run's streams";
  }
  if (view->loader.found || view->loader.derived) return;
  LoaderPart& l = view->loader;
  l.source = source;
  // IterBasedTrainLoop keeps max_epochs 1 and epoch 0; on resume it draws meta.iter batches from
  // its (infinite, seeded) sampler before training: the position is re-derived.
  if (*epoch == 0 && max_epochs && *max_epochs == 1 && *iter > 0) {
    l.derived = seed.has_value();
    l.kind = "mmengine IterBasedTrainLoop";
    l.evidence = p + "meta.iter " + std::to_string(*iter) +
                 ": mmengine's IterBasedTrainLoop advances its dataloader meta.iter batches on "
                 "resume; " +
                 seeded;
    l.derive_cost = "the resumed run loads and discards " + std::to_string(*iter) +
                    " batches (data loading only, no forward)";
    return;
  }
  // EpochBasedTrainLoop restarts the epoch it resumes in: right only at an epoch boundary.
  if (max_iters && max_epochs && *max_epochs > 0 && *max_iters % *max_epochs == 0 && *epoch > 0) {
    const int64_t per_epoch = *max_iters / *max_epochs;
    if (*iter == *epoch * per_epoch) {
      l.derived = seed.has_value();
      l.kind = "mmengine EpochBasedTrainLoop";
      l.evidence = p + "meta.iter " + std::to_string(*iter) + " = meta.epoch " +
                   std::to_string(*epoch) + " x " + std::to_string(per_epoch) +
                   " iterations per epoch: saved at an epoch boundary, and the next epoch's order "
                   "comes from seed + epoch; " +
                   seeded;
      l.derive_cost = "none: the resumed run starts epoch " + std::to_string(*epoch) + " afresh";
      return;
    }
    l.evidence = p + "meta.iter " + std::to_string(*iter) + " is inside epoch " +
                 std::to_string(*epoch) + " (" + std::to_string(per_epoch) +
                 " iterations per epoch): mmengine's EpochBasedTrainLoop restarts that epoch, "
                 "replaying its first " +
                 std::to_string(*iter - *epoch * per_epoch) + " batches";
  }
}

// A config that says the loop computes the LR from a counter (get_lr(iter_num)).
void recomputed_lr(const Value& root, const std::string& source, CheckpointView* view) {
  if (view->scheduler.found || !view->scheduler.recomputed.empty()) return;
  for (const char* name : {"config", "args", "cfg", "hyper_parameters", "hparams"}) {
    const Value* cfg = layout_settings(root.get(name));
    if (cfg == nullptr) continue;
    std::string said;
    for (const char* k : lr_recompute_config_keys()) {
      const Value* v = cfg->get(k);
      if (v == nullptr || v->kind == Kind::kNone) continue;
      said += (said.empty() ? "" : ", ") + std::string(k) + " " + summarize(*v);
    }
    if (said.empty()) continue;
    const Value* obj = root.get(name);
    const std::string what = obj->kind == Kind::kObject ? " (" + obj->qualname() + ")" : "";
    view->scheduler.recomputed = source_prefix(source) + name + what + " " + said +
                                 ": the loop recomputes the LR from the counter on resume "
                                 "(no scheduler object to save)";
    return;
  }
}

// A config that trains in float16 on a GPU (nanoGPT's train.py: dtype 'float16' makes
// torch.cuda.amp.GradScaler(enabled=True)): a GradScaler is expected, whether or not it was saved.
void fp16_config(const Value& root, const std::string& source, CheckpointView* view) {
  if (view->mixed_precision) return;
  for (const char* name : {"config", "args", "cfg", "hyper_parameters", "hparams"}) {
    const Value* cfg = layout_settings(root.get(name));
    const Value* dtype = cfg != nullptr ? cfg->get("dtype") : nullptr;
    if (dtype == nullptr || dtype->kind != Kind::kStr || dtype->s != "float16") continue;
    const Value* device = cfg->get("device");
    if (device != nullptr && device->kind == Kind::kStr && device->s.rfind("cpu", 0) == 0) return;
    view->mixed_precision = true;
    view->mixed_precision_evidence =
        source_prefix(source) + name + " dtype 'float16'" +
        (device != nullptr && device->kind == Kind::kStr ? " on " + device->s : std::string()) +
        " (fp16 autocast with a GradScaler, as nanoGPT's train.py makes one)";
    return;
  }
}

// timm's train.py: CheckpointSaver.save_checkpoint(epoch) at the end of an epoch writes
// {epoch, arch, state_dict, optimizer, version, args, ...}; resume starts at epoch + 1, so there
// is no position inside an epoch to lose.
void timm_train(const Value& root, const std::string& source, CheckpointView* view) {
  if (view->loader.found || view->loader.derived) return;
  const auto epoch = layout_int(&root, "epoch");
  const Value* args = root.get("args");
  if (!epoch || root.get("arch") == nullptr || root.get("version") == nullptr ||
      root.get("state_dict") == nullptr || args == nullptr || args->kind != Kind::kObject)
    return;
  LoaderPart& l = view->loader;
  l.derived = true;
  l.source = source;
  l.kind = "timm CheckpointSaver";
  l.evidence = source_prefix(source) + "timm train.py checkpoint (epoch, arch, args, version " +
               summarize(*root.get("version")) + "): saved at the end of epoch " +
               std::to_string(*epoch) + " and resumed at epoch " + std::to_string(*epoch + 1) +
               ", so no position inside an epoch is lost";
  l.derive_cost = "none: the resumed run starts the next epoch afresh";
}

}  // namespace

std::string source_prefix(const std::string& source) { return source.empty() ? "" : source + ": "; }

const Value* layout_settings(const Value* v) {
  if (v == nullptr) return nullptr;
  if (v->kind == Kind::kDict) return v;
  if (v->kind == Kind::kObject && v->state != nullptr && v->state->kind == Kind::kDict)
    return v->state;
  return nullptr;
}

std::optional<int64_t> layout_int(const Value* d, const char* key) {
  const Value* v = d != nullptr ? d->get(key) : nullptr;
  return v != nullptr ? v->as_int() : std::nullopt;
}

void note_library_layouts(const Value& root, const std::string& source, CheckpointView* view) {
  if (root.kind != Kind::kDict) return;
  mmengine(root, source, view);
  recomputed_lr(root, source, view);
  fp16_config(root, source, view);
  timm_train(root, source, view);
}

}  // namespace ckpt::verify
