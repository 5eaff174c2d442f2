// Checkpointer::restore_latest: the newest committed checkpoint back into the tracked objects,
// through the fast pipeline (resume::restore_rank), all or nothing. One function per step:
//
//   1. open_checkpoint: find the checkpoint, read its commit record and this rank's file
//      structure (dtypes, shapes, attributes; no tensor bytes).
//   2. sort_components, plan_restore: validate every component from the structure alone:
//      required components, the loader's dataset, the scheduler, the model's names/dtypes/
//      shapes/ties, the optimizer's groups and state. Each model parameter and optimizer state
//      tensor gets its target: the live tensor (in place) or, for optimizer state the optimizer
//      does not hold yet, a fresh one.
//   3. read_checked, check first (resume::RestoreOptions::check_first): a first read checks each
//      tensor's hash and the file's whole-file hash (the commit record's) and writes nothing
//      live; the tensors that are not read in place land in memory the read tree owns, and the
//      fresh targets (a fresh optimizer's state) are read into place in this read already.
//   4. LiveChanges::apply, on that checked tree, the steps that need bytes and can still fail:
//      device (or non-contiguous) targets copied from the tree (their old values cloned first),
//      a Python-written optimizer's targets, the RNG (captured first), the extra values. A
//      failure undoes what of 4 ran, and nothing live was written.
//   3b. read_checked, the second read copies into the live host tensors, in place (from the page
//      cache when the file fits in memory). If it fails — the file written to between the reads,
//      or a read error — 4 is undone except the extra values, and the error says the live
//      tensors are partly overwritten.
//   5. commit_restore: what cannot fail — optimizer hyperparameters and state, scheduler,
//      sampler cursor, counters; then the restore is journaled.
#include <torch/torch.h>

#include <optional>

#include "ckpt/format/manifest.h"
#include "ckpt/loader/resumable_sampler.h"
#include "ckpt/loader/sampler_node.h"
#include "ckpt/sched/scheduler.h"
#include "ckpt/store/rank_io.h"
#include "ckpt/store/run_dir.h"
#include "ckpt/torch/adapter.h"
#include "ckpt/torch/in_place.h"
#include "ckpt/torch/tensor_convert.h"
#include "ckpt/torch/torch_layout.h"
#include "resume/reshard_read.h"
#include "resume/restore.h"
#include "train/checkpointer.h"

namespace ckpt {
namespace {

// The group of component `c` in a rank file's tree (present: sort_components checked it).
const Node& group(const Node& root, Component c) { return *root.find_child(component_name(c)); }

// Whether the commit record lists `c` (its names are the format's text).
bool recorded(const CommitRecord& commit, Component c) {
  const std::vector<std::string>& names = commit.components;
  return std::find(names.begin(), names.end(), component_name(c)) != names.end();
}

// Step 1's result: the checkpoint to restore, its commit record and this rank's file structure.
struct OpenedCheckpoint {
  std::string dir;    // RUN/step-…
  std::string where;  // this rank's file: the context of step 2's errors
  CommitRecord commit;
  CommitFile listed;  // the file's entry in the commit record (size, whole-file hashes)
  store::RankStructure structure;
};

// Everything step 2 decided, applied by steps 3–5.
struct RestorePlan {
  std::vector<torch_adapter::TensorTarget> targets;  // model, then optimizer state
  std::optional<torch_adapter::PreparedOptimizer> optimizer;
  std::optional<sched::Scheduler> scheduler;
  std::optional<loader::LoaderCursor> cursor;
  // A Python-written optimizer (torch's state_dict layout) is converted, validated and prepared
  // from the read tree in step 4: its file paths are not the adapter's.
  bool optimizer_torch_layout = false;
};

// Step 1: the commit record (find_latest's) and this rank's structure (dtypes, shapes, attributes;
// no bytes). The datasets' descriptions come from the manifest: the restore checks every byte of
// the file, their HDF5 headers included, against the commit record before it writes anything live.
Result<OpenedCheckpoint> open_checkpoint(Env* env, const std::string& dir, int64_t rank,
                                         const CommitRecord& commit) {
  OpenedCheckpoint c;
  c.dir = dir;
  c.commit = commit;  // as find_latest read it (no second GET on a store)
  const int64_t file_rank = std::min<int64_t>(rank, c.commit.world_size - 1);
  c.where = path_join(dir, rank_file_name(file_rank));
  CKPT_ASSIGN_OR_RETURN(c.listed, store::listed_rank_file(c.commit, dir, file_rank));
  CKPT_ASSIGN_OR_RETURN(c.structure, store::open_rank_structure(
                                         env, dir, file_rank, store::DatasetCheck::kFromManifest));
  CKPT_RETURN_IF_ERROR(store::check_rank_against_commit(c.commit, c.structure.root, dir, c.where));
  return c;
}

// Step 2, first half: tracked components present in the checkpoint go to rep->components, the
// others to rep->missing; a missing required one is refused.
Status sort_components(const Tracked& tracked, bool has_extra, const OpenedCheckpoint& c,
                       const std::set<Component>& required, RestoreReport* rep) {
  const std::pair<Component, bool> wanted[] = {
      {Component::kModel, tracked.model != nullptr},
      {Component::kOptimizer, tracked.optimizer != nullptr},
      {Component::kScheduler, tracked.scheduler != nullptr},
      {Component::kRng, true},
      {Component::kLoader, tracked.sampler != nullptr},
      {Component::kTrain, tracked.counters != nullptr},
      {Component::kExtra, has_extra}};
  for (const auto& [component, is_tracked] : wanted) {
    if (!is_tracked) continue;
    if (recorded(c.commit, component) &&
        c.structure.root.find_child(component_name(component)) != nullptr) {
      rep->components.insert(component);
      continue;
    }
    rep->missing.insert(component);
    if (required.count(component) != 0) {
      std::string has;
      for (const auto& h : c.commit.components) has += (has.empty() ? "" : ", ") + h;
      return not_found(c.dir + ": required component \"" + component_name(component) +
                       "\" is not in the checkpoint (it has: " + has + ")");
    }
  }
  return Status::ok();
}

// Step 2, second half, for the components whose checks need no tensor bytes.
Result<RestorePlan> plan_restore(const Tracked& tracked, const Node& root, const RestoreReport& rep,
                                 const std::string& dir) {
  RestorePlan plan;
  auto restoring = [&](Component c) { return rep.components.count(c) != 0; };
  if (restoring(Component::kLoader)) {
    CKPT_ASSIGN_OR_RETURN(auto spec_cursor,
                          loader::sampler_from_node(group(root, Component::kLoader)));
    const loader::SamplerSpec& saved = spec_cursor.first;
    const loader::SamplerSpec& here = tracked.sampler->spec();
    if (saved.dataset_size != here.dataset_size || saved.seed != here.seed ||
        saved.shuffle != here.shuffle || saved.drop_last != here.drop_last ||
        saved.dataset_fingerprint != here.dataset_fingerprint) {
      return mismatch(dir +
                      ": the loader component describes another dataset or order "
                      "(dataset_size " +
                      std::to_string(saved.dataset_size) + " vs " +
                      std::to_string(here.dataset_size) + ", seed " + std::to_string(saved.seed) +
                      " vs " + std::to_string(here.seed) + ")");
    }
    plan.cursor = spec_cursor.second;
  }
  if (restoring(Component::kScheduler)) {
    CKPT_ASSIGN_OR_RETURN(plan.scheduler,
                          sched::Scheduler::from_node(group(root, Component::kScheduler)));
  }
  if (restoring(Component::kModel)) {
    Node model_node = group(root, Component::kModel);  // metadata only: no bytes are copied
    // The file names a tie's target by its full path; model_targets wants it within /model.
    const std::string prefix = std::string("/") + component_name(Component::kModel) + "/";
    for (auto& [name, t] : model_node.tensors) {
      if (t.alias_of.rfind(prefix, 0) == 0) t.alias_of = t.alias_of.substr(prefix.size());
    }
    CKPT_ASSIGN_OR_RETURN(plan.targets, torch_adapter::model_targets(model_node, *tracked.model));
  }
  if (restoring(Component::kOptimizer)) {
    const Node& opt_node = group(root, Component::kOptimizer);
    if (torch_adapter::is_torch_optimizer_layout(opt_node)) {
      plan.optimizer_torch_layout = true;
    } else {
      CKPT_ASSIGN_OR_RETURN(plan.optimizer, torch_adapter::prepare_optimizer(
                                                opt_node, *tracked.optimizer, *tracked.model));
      for (const auto& t : plan.optimizer->targets()) plan.targets.push_back(t);
    }
  }
  return plan;
}

bool reads_in_place(const at::Tensor& t) { return t.device().is_cpu() && t.is_contiguous(); }

// Step 4's undo for the targets the pipeline could not fill: their old values.
struct DeviceUndo {
  std::vector<std::pair<at::Tensor, at::Tensor>> saved;  // live tensor, clone
  void apply() {
    at::NoGradGuard no_grad;
    for (auto& [live, old] : saved) live.copy_(old);
    saved.clear();
  }
};

// Step 4 for the targets the pipeline did not fill (all of them with `all`): copied from the
// restored tree, live ones' old values cloned first.
Status copy_from_tree(const std::vector<torch_adapter::TensorTarget>& targets, bool all, Node* tree,
                      DeviceUndo* undo) {
  for (const auto& t : targets) {
    if (!all && reads_in_place(t.tensor)) continue;
    const Tensor* src = store::find_tensor(tree, t.path);
    if (src == nullptr) return internal_error("tensor \"" + t.path + "\" vanished from the tree");
    CKPT_RETURN_IF_ERROR(torch_adapter::check_compatible(*src, t.tensor, t.path));
    at::Tensor dst = t.tensor;
    try {
      if (!t.fresh) undo->saved.emplace_back(dst, dst.clone());
    } catch (const c10::Error& e) {
      return internal_error("tensor \"" + t.path +
                            "\": cannot save its old value: " + e.what_without_backtrace());
    }
    CKPT_RETURN_IF_ERROR(torch_adapter::copy_into(*src, dst, t.path));
  }
  return Status::ok();
}

// Step 4 for a Python-written optimizer: converted from the read tree, validated and its targets
// filled (the live optimizer itself changes only at plan->optimizer->commit()).
Status prepare_torch_layout_optimizer(const Tracked& tracked, Node* tree, RestorePlan* plan,
                                      DeviceUndo* undo) {
  CKPT_ASSIGN_OR_RETURN(
      Node converted, torch_adapter::optimizer_from_torch_layout(
                          group(*tree, Component::kOptimizer), *tracked.optimizer, *tracked.model));
  CKPT_ASSIGN_OR_RETURN(plan->optimizer, torch_adapter::prepare_optimizer(
                                             converted, *tracked.optimizer, *tracked.model));
  Node wrapper;  // so that the targets' "/optimizer/..." paths resolve
  wrapper.children[component_name(Component::kOptimizer)] = std::move(converted);
  return copy_from_tree(plan->optimizer->targets(), /*all=*/true, &wrapper, undo);
}

void apply_counters(const Node& t, TrainCounters* counters) {
  counters->global_step = t.get_int("global_step");
  counters->epoch = t.get_int("epoch");
  counters->samples_seen = t.get_int("samples_seen");
  counters->tokens_seen = t.get_int("tokens_seen");
  counters->grad_accum_steps = t.get_int("grad_accum_steps", 1);
  counters->grad_accum_pos = t.get_int("grad_accum_pos");
  counters->amp_loss_scale = t.get_double("amp_loss_scale", 0);
}

// Step 4: what the restore changes in live objects from the checked tree before the in-place
// copy — device (and non-contiguous) targets, a Python-written optimizer's targets, the RNG, the
// extra values — and the undo of the first three. apply() undoes its own partial work on
// failure; undo() is for a failure after it succeeded (the second read's).
class LiveChanges {
 public:
  LiveChanges(const Tracked& tracked, const RestoreReport& rep, RestorePlan* plan,
              torch_adapter::GeneratorRegistry& generators, torch_adapter::ExtraRegistry& extra)
      : tracked_(tracked), rep_(rep), plan_(plan), generators_(generators), extra_(extra) {}

  Status apply(Node* tree) {
    Status s = copy_from_tree(plan_->targets, /*all=*/false, tree, &device_undo_);
    if (s.is_ok() && plan_->optimizer_torch_layout) {
      s = prepare_torch_layout_optimizer(tracked_, tree, plan_, &device_undo_);
    }
    if (s.is_ok() && restoring(Component::kRng)) {
      s = torch_adapter::capture_rng(generators_, &rng_before_);
      if (s.is_ok()) s = torch_adapter::restore_rng(group(*tree, Component::kRng), generators_);
      rng_restored_ = s.is_ok();
    }
    if (s.is_ok() && restoring(Component::kExtra)) {
      s = torch_adapter::restore_extra(group(*tree, Component::kExtra), extra_);
    }
    if (!s.is_ok()) undo();
    return s;
  }

  bool changed_anything() const { return rng_restored_ || !device_undo_.saved.empty(); }

  // Puts back the cloned targets and the RNG captured before (it was valid); not the extra
  // values (restore_extra keeps no copy of them).
  void undo() {
    device_undo_.apply();
    if (rng_restored_) (void)torch_adapter::restore_rng(rng_before_, generators_);
    rng_restored_ = false;
  }

 private:
  bool restoring(Component c) const { return rep_.components.count(c) != 0; }

  const Tracked& tracked_;
  const RestoreReport& rep_;
  RestorePlan* plan_;
  torch_adapter::GeneratorRegistry& generators_;
  torch_adapter::ExtraRegistry& extra_;
  DeviceUndo device_undo_;
  Node rng_before_;
  bool rng_restored_ = false;
};

// Steps 3, 4 and 3b through the pipeline: every hash checked first with nothing live written,
// step 4 on the checked tree, then the copy into the live host tensors. A failure of the copy
// (the file changed between the reads, or a read error) undoes step 4 but the extra values
// (LiveChanges::undo); restore_rank's message says the live tensors are partly written.
Result<Node> read_checked(Env* env, OpenedCheckpoint checkpoint, const RestorePlan& plan,
                          const RestoreReport& rep, LiveChanges* live) {
  resume::RestoreOptions ro;
  ro.components = rep.components;
  for (const auto& t : plan.targets) {
    if (!reads_in_place(t.tensor)) continue;
    ro.destinations[t.path] = {t.tensor.data_ptr(), t.tensor.nbytes(), t.fresh};
  }
  resume::check_whole_file(checkpoint.listed, &ro);
  ro.check_first = true;
  ro.before_in_place = [live](Node* tree) { return live->apply(tree); };
  Result<Node> read = resume::restore_rank(env, std::move(checkpoint.structure), ro);
  if (!read.is_ok() && live->changed_anything()) live->undo();
  return read;
}

// Step 5: what cannot fail, into the live objects.
void commit_restore(const Tracked& tracked, const Node& tree, const RestoreReport& rep,
                    RestorePlan* plan) {
  if (plan->optimizer) plan->optimizer->commit(*tracked.optimizer);
  if (plan->scheduler) *tracked.scheduler = *plan->scheduler;
  if (plan->cursor) tracked.sampler->set_cursor(*plan->cursor);
  if (rep.components.count(Component::kTrain) != 0) {
    apply_counters(group(tree, Component::kTrain), tracked.counters);
  }
}

// The ShardRead of the tracked LocalShards ("/shards/<name>" in the index), checked, nothing
// written; a checkpoint without an INDEX is refused naming the shards it lacks.
Result<resume::ShardRead> prepare_shards(Env* env, const std::string& dir,
                                         const std::vector<LocalShard>& shards,
                                         const CommitRecord& commit) {
  std::vector<resume::ShardTarget> targets;
  for (const LocalShard& s : shards) {
    if (s.local == nullptr || !s.local->defined() || !s.local->device().is_cpu() ||
        !s.local->is_contiguous() || s.local->dim() != static_cast<int64_t>(s.offsets.size())) {
      return invalid_argument("restore: shard \"" + s.name +
                              "\": local is not a contiguous CPU tensor of as many dimensions "
                              "as it has offsets");
    }
    CKPT_ASSIGN_OR_RETURN(DType dt, torch_adapter::to_ckpt_dtype(s.local->scalar_type()));
    targets.push_back({std::string("/") + kShardsGroup + "/" + s.name,
                       store::make_extent(s.offsets, s.local->sizes().vec()), dt,
                       s.local->data_ptr(),
                       static_cast<uint64_t>(s.local->numel()) * s.local->element_size()});
  }
  auto sr = resume::ShardRead::prepare(env, dir, std::move(targets), {}, &commit);
  if (sr.status().code() == Code::kNotFound) {
    return not_found(sr.status().message() + ": the tracked shards (\"" + shards.front().name +
                     "\"...) are not in it");
  }
  return sr;
}

}  // namespace

Result<RestoreReport> Checkpointer::restore_latest() {
  RestoreReport rep;
  CKPT_RETURN_IF_ERROR(wait());  // a save in flight is committed (or failed) first
  CKPT_RETURN_IF_ERROR(acquire_lock());
  // The commit records, newest first, up to the first committed one (on a store one LIST and a
  // GET or two, however many checkpoints are kept); all of them only where nothing is committed,
  // for the damaged ones a fresh start would step over.
  CKPT_ASSIGN_OR_RETURN(store::LatestOrFresh found, store::look_up_latest(env_, options_.run_dir));
  if (!found.latest) {
    CKPT_RETURN_IF_ERROR(check_damaged(found.damaged, -1, &rep));
    if (!rep.skipped.empty()) rep.note = "no intact checkpoint: a fresh start";
    return rep;  // a fresh start
  }
  store::Latest* latest = &*found.latest;
  CKPT_RETURN_IF_ERROR(check_damaged(latest->damaged_newer, latest->step, &rep));
  rep.step = latest->step;
  rep.checkpoint = path_basename(latest->dir);
  rep.note = latest->note;
  CKPT_ASSIGN_OR_RETURN(OpenedCheckpoint checkpoint,
                        open_checkpoint(env_, latest->dir, options_.rank, latest->commit));
  rep.saved_world_size = checkpoint.commit.world_size;
  CKPT_RETURN_IF_ERROR(
      sort_components(tracked_, !extra_.values().empty(), checkpoint, options_.required, &rep));
  Result<RestorePlan> plan = plan_restore(tracked_, checkpoint.structure.root, rep, latest->dir);
  if (!plan.is_ok()) return plan.status().with_context(checkpoint.where);
  // Pieces of global tensors (LocalShard): every saved box they overlap is read and checked
  // first, from whichever rank files hold them; copied in once everything else was applied.
  std::optional<resume::ShardRead> shards;
  if (tracked_.shards != nullptr && !tracked_.shards->empty()) {
    CKPT_ASSIGN_OR_RETURN(shards,
                          prepare_shards(env_, latest->dir, *tracked_.shards, latest->commit));
  }
  LiveChanges live(tracked_, rep, &*plan, generators_, extra_);
  CKPT_ASSIGN_OR_RETURN(Node tree, read_checked(env_, std::move(checkpoint), *plan, rep, &live));
  commit_restore(tracked_, tree, rep, &*plan);
  if (shards) {
    CKPT_RETURN_IF_ERROR(shards->copy_out());
    rep.shards = tracked_.shards->size();
  }
  rep.restored = true;
  CKPT_RETURN_IF_ERROR(journal_restore(rep, plan->cursor ? &*plan->cursor : nullptr));
  return rep;
}

}  // namespace ckpt
