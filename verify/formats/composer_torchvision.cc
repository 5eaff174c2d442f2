#include "verify/formats/composer_torchvision.h"

#include <optional>
#include <string>

#include "verify/formats/library_layouts.h"

namespace ckpt::verify {
namespace {

// Past this a saved "epoch" is not an epoch count (and arithmetic on it could overflow).
constexpr int64_t kMaxEpoch = int64_t{1} << 40;

bool true_at(const Value* d, const char* key) {
  const Value* v = d != nullptr ? d->get(key) : nullptr;
  return v != nullptr && v->kind == Kind::kBool && v->b;
}

bool empty_container(const Value* v) {
  return v != nullptr &&
         ((v->kind == Kind::kDict && v->entries.empty()) ||
          ((v->kind == Kind::kList || v->kind == Kind::kTuple) && v->items.empty()));
}

// Some param group of the saved optimizers has `initial_lr`: a torch LR scheduler was attached.
bool scheduler_was_attached(const CheckpointView& view) {
  auto has = [](const OptimizerPart& o) {
    for (const auto& g : o.groups)
      if (g.values.present.count("initial_lr") != 0) return true;
    return false;
  };
  if (view.optimizer.found && has(view.optimizer)) return true;
  for (const auto& o : view.more_optimizers)
    if (has(o)) return true;
  return false;
}

// ---- Composer ---------------------------------------------------------------------------------

// state.timestamp.Timestamp: Composer saves each serialized attribute as {type name: state}.
const Value* composer_timestamp(const Value& state) {
  const Value* ts = layout_settings(state.get("timestamp"));
  const Value* t = ts != nullptr ? layout_settings(ts->get("Timestamp")) : nullptr;
  return t;
}

// The Trainer resumes every counter from its Timestamp; the generic walk only sees depth 2 and
// would take Timestamp.iteration (0 unless iterations are configured) for the step.
void composer_counters(const Value& ts, const std::string& source, CheckpointView* view) {
  const auto batch = layout_int(&ts, "batch");
  const auto epoch = layout_int(&ts, "epoch");
  if (!batch || !epoch) return;
  CountersPart c;
  c.found = true;
  c.source = source;
  c.global_step = batch;
  c.epoch = static_cast<double>(*epoch);
  c.step_key = "state.timestamp.batch";
  c.evidence = source_prefix(source) + "state.timestamp (Composer Timestamp): batch " +
               std::to_string(*batch) + ", epoch " + std::to_string(*epoch);
  for (const char* k : {"sample", "token", "batch_in_epoch"}) {
    if (auto v = layout_int(&ts, k)) c.evidence += ", " + std::string(k) + " " + std::to_string(*v);
  }
  view->counters = c;
}

// Composer resumes inside an epoch by iterating the train loader and discarding batch_in_epoch
// batches (Trainer spin_dataloaders, the default), after setting the DistributedSampler's epoch
// for every finished epoch; a dataset with its own state (StreamingDataset) is restored instead.
void composer_loader(const Value& state, const Value& ts, const std::string& source,
                     CheckpointView* view) {
  LoaderPart& l = view->loader;
  if (l.found) return;
  const std::string p = source_prefix(source);
  const Value* ds = layout_settings(state.get("dataset_state"));
  const Value* train = ds != nullptr ? ds->get("train") : nullptr;
  if (train != nullptr && train->kind != Kind::kNone && !empty_container(train)) {
    l = LoaderPart{};
    l.found = true;
    l.source = source;
    l.kind = "Composer dataset_state";
    l.evidence = p +
                 "state.dataset_state.train: the train dataset's own state, which Composer "
                 "loads on resume instead of spinning the loader";
    return;
  }
  const auto in_epoch = layout_int(&ts, "batch_in_epoch");
  const auto epoch = layout_int(&ts, "epoch");
  if (!in_epoch || !epoch) return;
  const auto seed = layout_int(&state, "rank_zero_seed");
  const std::string seeded =
      (seed ? "rank_zero_seed " + std::to_string(*seed) : std::string("no rank_zero_seed")) +
      "; the same batches need a sampler whose order is a function of seed and epoch (Composer's "
      "DistributedSampler)";
  l = LoaderPart{};
  l.derived = true;
  l.source = source;
  l.kind = "Composer timestamp";
  l.epoch = epoch;
  l.batches = in_epoch;
  if (*in_epoch == 0) {
    l.evidence = p + "state.timestamp batch_in_epoch 0 at epoch " + std::to_string(*epoch) +
                 ": saved at an epoch boundary; on resume Composer sets the sampler's epoch for "
                 "each finished epoch and starts epoch " +
                 std::to_string(*epoch) + " afresh; " + seeded;
    l.derive_cost = "none: the resumed run starts the next epoch afresh";
    return;
  }
  l.evidence = p + "state.timestamp batch_in_epoch " + std::to_string(*in_epoch) + " of epoch " +
               std::to_string(*epoch) +
               ": on resume Composer's Trainer (spin_dataloaders, the default) iterates the train "
               "loader and discards the epoch's first " +
               std::to_string(*in_epoch) + " batches, restoring 'rng' just before the next one; " +
               seeded;
  l.derive_cost = "the resumed run loads and discards " + std::to_string(*in_epoch) +
                  " batches (data loading only, no forward)";
}

// An empty state.schedulers is right for a run without schedulers, and a lost schedule when the
// optimizer's groups say one was attached (torch's LRScheduler writes initial_lr).
void composer_scheduler(const Value& state, const std::string& source, CheckpointView* view) {
  if (view->scheduler.found || !empty_container(state.get("schedulers"))) return;
  if (!scheduler_was_attached(*view)) return;
  view->scheduler.evidence =
      source_prefix(source) +
      "state.schedulers is empty, but the optimizer's param_groups carry initial_lr (an LR "
      "scheduler was attached): Composer resumes with no schedule to load";
}

// Composer gathers every rank's generators into "rng" (reproducibility.get_rng_state) and
// restores them on resume; without it the run keeps the generators Trainer(seed) set at start.
void composer_rng(const Value& root, const Value& state, const std::string& source,
                  CheckpointView* view) {
  const std::string p = source_prefix(source);
  const Value* rng = root.get("rng");
  const auto seed = layout_int(&state, "rank_zero_seed");
  if (rng == nullptr && !view->rng_cpu.found) {
    view->format_gaps[AuditComponent::kRngCpu] =
        p +
        "no 'rng' entry: Composer's save_checkpoint writes every rank's generator states "
        "(python, numpy, torch, cuda) there, and this file has none, so the resumed run keeps "
        "the generators Trainer(seed" +
        (seed ? "=" + std::to_string(*seed) : std::string()) +
        ") set at start instead of continuing the run's streams";
    return;
  }
  const Value* meta = layout_settings(state.get("metadata"));
  const auto world = layout_int(meta, "world_size");
  if (rng != nullptr && rng->kind == Kind::kList && world &&
      static_cast<int64_t>(rng->items.size()) < *world) {
    view->findings.push_back({Severity::kError, AuditComponent::kRngCpu,
                              p + "rng holds " + std::to_string(rng->items.size()) +
                                  " rank state(s), but " + "state.metadata.world_size is " +
                                  std::to_string(*world) +
                                  ": the other ranks resume with fresh generators",
                              true});
  }
}

// Composer's fp16 path (precision 'amp_fp16') keeps a GradScaler under state.scaler; fp32 and
// bf16 keep none worth saving.
void composer_precision(const Value& state, const std::string& source, CheckpointView* view) {
  const Value* meta = layout_settings(state.get("metadata"));
  const Value* precision = meta != nullptr ? meta->get("precision") : nullptr;
  if (precision == nullptr || !precision->is_str("amp_fp16")) return;
  view->mixed_precision = true;
  if (view->mixed_precision_evidence.empty())
    view->mixed_precision_evidence =
        source_prefix(source) + "state.metadata.precision 'amp_fp16' (Composer keeps a GradScaler)";
}

void composer(const Value& root, const DetectContext& ctx, CheckpointView* view) {
  const Value* state = root.get("state");
  if (state == nullptr || state->kind != Kind::kDict) return;
  const Value* ts = composer_timestamp(*state);
  if (ts == nullptr || state->get("rank_zero_seed") == nullptr ||
      state->get("optimizers") == nullptr)
    return;
  composer_counters(*ts, ctx.source, view);
  composer_loader(*state, *ts, ctx.source, view);
  composer_scheduler(*state, ctx.source, view);
  composer_rng(root, *state, ctx.source, view);
  composer_precision(*state, ctx.source, view);
}

// ---- torchvision reference scripts ------------------------------------------------------------

// The options every references/*/train.py parser has (resume and distributed flags), on an
// argparse.Namespace saved beside model, optimizer and an integer epoch.
const Value* torchvision_args(const Value& root) {
  const Value* args = root.get("args");
  const Value* model = root.get("model");
  if (args == nullptr || args->kind != Kind::kObject || args->qualname() != "argparse.Namespace")
    return nullptr;
  if (model == nullptr || model->kind != Kind::kDict || root.get("optimizer") == nullptr ||
      !layout_int(&root, "epoch"))
    return nullptr;
  const Value* a = layout_settings(args);
  if (a == nullptr || a->get("start_epoch") == nullptr || a->get("resume") == nullptr ||
      a->get("dist_url") == nullptr)
    return nullptr;
  return a;
}

// With --model-ema the EMA copy (module.* plus n_averaged) is one tensor larger than the model,
// so the generic walk takes it for the model; train.py loads "model" into the network.
void torchvision_model(const Value& root, const DetectContext& ctx, CheckpointView* view) {
  const Value* ema = root.get("model_ema");
  if (ema == nullptr) return;
  Value key;
  key.kind = Kind::kStr;
  key.s = "model";
  Value only;
  only.kind = Kind::kDict;
  only.entries.push_back({&key, root.get("model")});
  CheckpointView sub;
  detect_components(only, ctx, &sub);
  if (!sub.model.found) return;
  view->model = sub.model;
  view->model.evidence += " (model_ema beside it: the EMA copy, " +
                          std::to_string(ema->kind == Kind::kDict ? ema->entries.size() : 0) +
                          " entries incl. n_averaged, restored with --model-ema)";
}

// "epoch" is the index of the epoch just finished (resume: start_epoch = epoch + 1), while the
// counter the rules compare a per-epoch scheduler with counts finished epochs.
void torchvision_counters(int64_t epoch, CheckpointView* view) {
  CountersPart& c = view->counters;
  c.found = true;
  c.epoch = static_cast<double>(epoch + 1);
  c.evidence += (c.evidence.empty() ? "" : " ") + std::string("(torchvision train.py saves the ") +
                "index of the epoch it just finished: " + std::to_string(epoch + 1) +
                " epoch(s) done, the resumed run starts at epoch " + std::to_string(epoch + 1) +
                ")";
}

// train.py steps lr_scheduler once per epoch (classification, detection) or once per iteration
// (segmentation): either way at least epoch + 1 times. Fewer is a schedule that restarted; none
// saved, with initial_lr in the groups (a scheduler was attached), is one the resume cannot load.
void torchvision_scheduler(const Value& root, int64_t epoch, const std::string& source,
                           CheckpointView* view) {
  const SchedulerPart& s = view->scheduler;
  if (!s.found) {
    if (root.get("lr_scheduler") == nullptr && scheduler_was_attached(*view))
      view->scheduler.evidence =
          source_prefix(source) +
          "no 'lr_scheduler': torchvision train.py saves it and loads it on resume, and the "
          "optimizer's param_groups carry initial_lr (a scheduler was attached)";
    return;
  }
  if (!s.last_epoch || *s.last_epoch >= epoch + 1) return;
  view->findings.push_back(
      {Severity::kError, AuditComponent::kScheduler,
       source_prefix(source) + "lr_scheduler last_epoch " + std::to_string(*s.last_epoch) +
           " < epoch + 1 = " + std::to_string(epoch + 1) +
           ": train.py steps it at least once per finished epoch, so its state restarted",
       true});
}

void torchvision_loader(int64_t epoch, const Value& args, const std::string& source,
                        CheckpointView* view) {
  LoaderPart& l = view->loader;
  if (l.found || l.derived) return;
  l.derived = true;
  l.source = source;
  l.kind = "torchvision references train.py";
  l.epoch = epoch;
  l.evidence = source_prefix(source) +
               "torchvision reference train.py checkpoint (epoch, args): saved at the end of "
               "epoch " +
               std::to_string(epoch) + " and resumed at epoch " + std::to_string(epoch + 1) +
               " (start_epoch = epoch + 1), so no position inside an epoch is lost; the next "
               "epoch's order comes from " +
               (true_at(&args, "distributed") ? "DistributedSampler seed + epoch"
                                              : "RandomSampler and the resumed run's generator");
  l.derive_cost = "none: the resumed run starts the next epoch afresh";
}

void torchvision_rng(const Value& args, const std::string& source, CheckpointView* view) {
  if (view->rng_cpu.found || view->format_gaps.count(AuditComponent::kRngCpu) != 0) return;
  const auto seed = layout_int(&args, "seed");
  view->format_gaps[AuditComponent::kRngCpu] =
      source_prefix(source) + "torchvision's reference train.py saves no generator state" +
      (seed ? " (args.seed " + std::to_string(*seed) + " seeds the start only)"
            : std::string(" and sets no seed")) +
      ": the resumed run draws shuffling, augmentation and dropout from a fresh generator";
}

// --amp: train.py makes a GradScaler and (since it saves one) writes it under "scaler".
void torchvision_scaler(const Value& args, const std::string& source, CheckpointView* view) {
  if (!true_at(&args, "amp")) return;
  view->mixed_precision = true;
  if (view->mixed_precision_evidence.empty())
    view->mixed_precision_evidence =
        source_prefix(source) + "args.amp True (train.py trains under autocast with a GradScaler)";
}

void torchvision(const Value& root, const DetectContext& ctx, CheckpointView* view) {
  const Value* args = torchvision_args(root);
  if (args == nullptr) return;
  const int64_t epoch = *layout_int(&root, "epoch");
  if (epoch < 0 || epoch > kMaxEpoch) return;  // not an epoch index; and epoch + 1 stays defined
  torchvision_model(root, ctx, view);
  torchvision_counters(epoch, view);
  torchvision_scheduler(root, epoch, ctx.source, view);
  torchvision_loader(epoch, *args, ctx.source, view);
  torchvision_rng(*args, ctx.source, view);
  torchvision_scaler(*args, ctx.source, view);
}

}  // namespace

void note_composer_torchvision(const Value& root, const DetectContext& ctx, CheckpointView* view) {
  if (root.kind != Kind::kDict) return;
  composer(root, ctx, view);
  torchvision(root, ctx, view);
}

}  // namespace ckpt::verify
