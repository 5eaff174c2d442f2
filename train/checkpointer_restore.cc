// Checkpointer::restore_latest: the newest committed checkpoint back into the tracked objects,
// through the fast pipeline (resume::restore_rank), all or nothing.
//
//   1. Find the checkpoint, read its commit record and this rank's file structure (dtypes,
//      shapes, attributes; no tensor bytes).
//   2. Validate every component from the structure alone: required components, the loader's
//      dataset, the scheduler, the model's names/dtypes/shapes/ties, the optimizer's groups and
//      state. Each model parameter and optimizer state tensor gets its target: the live tensor
//      (in place) or, for optimizer state the optimizer does not hold yet, a fresh one.
//   3. Check first (resume::RestoreOptions::check_first): a first read checks each tensor's hash
//      and the file's whole-file hash (the commit record's) and writes nothing live; only the
//      tensors that are not read in place land, in memory the read tree owns.
//   4. On that checked tree, the steps that need bytes and can still fail: device (or
//      non-contiguous) targets copied from the tree (their old values cloned first), the RNG,
//      the extra values. A failure undoes what of 4 ran, and nothing live was written.
//   3b. The second read copies into the live host tensors, in place (from the page cache when
//      the file fits in memory). If it fails — the file written to between the reads, or a read
//      error — 4 is undone and the error says the live tensors are partly overwritten.
//   5. Commit what cannot fail: optimizer hyperparameters and state, scheduler, sampler cursor,
//      counters; journal the restore.
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
#include "ckpt/torch/torch_layout.h"
#include "resume/restore.h"
#include "train/checkpointer.h"

namespace ckpt {
namespace {

bool contains(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

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

// Tracked components present in the checkpoint go to rep->components, the others to
// rep->missing; a missing required one is refused.
Status sort_components(const Tracked& tracked, bool has_extra, const CommitRecord& commit,
                       const Node& root, const std::set<Component>& required,
                       const std::string& dir, RestoreReport* rep) {
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
    const std::string name = component_name(component);
    if (contains(commit.components, name) && root.find_child(name) != nullptr) {
      rep->components.push_back(name);
      continue;
    }
    rep->missing.push_back(name);
    if (required.count(component) != 0) {
      std::string has;
      for (const auto& h : commit.components) has += (has.empty() ? "" : ", ") + h;
      return not_found(dir + ": required component \"" + name +
                       "\" is not in the checkpoint (it has: " + has + ")");
    }
  }
  return Status::ok();
}

// Step 2 for the components whose checks need no tensor bytes.
Result<RestorePlan> plan_restore(const Tracked& tracked, const Node& root, const RestoreReport& rep,
                                 const std::string& dir) {
  RestorePlan plan;
  if (contains(rep.components, "loader")) {
    CKPT_ASSIGN_OR_RETURN(auto spec_cursor, loader::sampler_from_node(*root.find_child("loader")));
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
  if (contains(rep.components, "scheduler")) {
    CKPT_ASSIGN_OR_RETURN(plan.scheduler,
                          sched::Scheduler::from_node(*root.find_child("scheduler")));
  }
  if (contains(rep.components, "model")) {
    Node model_node = *root.find_child("model");  // metadata only: no bytes are copied
    for (auto& [name, t] : model_node.tensors) {  // the file names a tie's target by full path
      if (t.alias_of.rfind("/model/", 0) == 0) t.alias_of = t.alias_of.substr(7);
    }
    CKPT_ASSIGN_OR_RETURN(plan.targets, torch_adapter::model_targets(model_node, *tracked.model));
  }
  if (contains(rep.components, "optimizer")) {
    const Node& opt_node = *root.find_child("optimizer");
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
  CKPT_ASSIGN_OR_RETURN(Node converted,
                        torch_adapter::optimizer_from_torch_layout(
                            *tree->find_child("optimizer"), *tracked.optimizer, *tracked.model));
  CKPT_ASSIGN_OR_RETURN(plan->optimizer, torch_adapter::prepare_optimizer(
                                             converted, *tracked.optimizer, *tracked.model));
  Node wrapper;  // so that the targets' "/optimizer/..." paths resolve
  wrapper.children["optimizer"] = std::move(converted);
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

}  // namespace

Result<RestoreReport> Checkpointer::restore_latest() {
  RestoreReport rep;
  CKPT_RETURN_IF_ERROR(wait());  // a save in flight is committed (or failed) first
  CKPT_RETURN_IF_ERROR(acquire_lock());
  CKPT_RETURN_IF_ERROR(check_damaged(&rep));
  auto latest = store::find_latest(env_, options_.run_dir);
  if (!latest.is_ok()) {
    if (latest.status().code() == Code::kNotFound) {  // a fresh start
      if (!rep.skipped.empty()) rep.note = "no intact checkpoint: a fresh start";
      return rep;
    }
    return latest.status();
  }
  rep.step = latest->step;
  rep.checkpoint = path_basename(latest->dir);
  rep.note = latest->note;
  // 1. The commit record and this rank's structure.
  CKPT_ASSIGN_OR_RETURN(CommitRecord commit, store::read_commit(env_, latest->dir));
  const int64_t file_rank = std::min<int64_t>(options_.rank, commit.world_size - 1);
  rep.saved_world_size = commit.world_size;
  const std::string where = path_join(latest->dir, rank_file_name(file_rank));
  CKPT_ASSIGN_OR_RETURN(const CommitFile listed,
                        store::listed_rank_file(commit, latest->dir, file_rank));
  // The datasets' descriptions come from the manifest: the restore checks every byte of the
  // file, their HDF5 headers included, against the commit record before it writes anything live.
  CKPT_ASSIGN_OR_RETURN(
      store::RankStructure rs,
      store::open_rank_structure(env_, latest->dir, file_rank, store::DatasetCheck::kFromManifest));
  CKPT_RETURN_IF_ERROR(store::check_rank_against_commit(commit, rs.root, latest->dir, where));

  // 2. Validate everything from the structure.
  CKPT_RETURN_IF_ERROR(sort_components(tracked_, !extra_.values().empty(), commit, rs.root,
                                       options_.required, latest->dir, &rep));
  auto ctx = [&](Status s) { return s.with_context(where); };
  Result<RestorePlan> planned = plan_restore(tracked_, rs.root, rep, latest->dir);
  if (!planned.is_ok()) return ctx(planned.status());
  RestorePlan& plan = *planned;

  // 3–4. Check every hash first (nothing live is written), run step 4 on the checked tree, then
  // copy into the live tensors.
  resume::RestoreOptions ro;
  ro.components = std::set<std::string>(rep.components.begin(), rep.components.end());
  for (const auto& t : plan.targets) {
    if (!reads_in_place(t.tensor)) continue;
    ro.destinations[t.path] = {t.tensor.data_ptr(), t.tensor.nbytes()};
  }
  resume::check_whole_file(listed, &ro);
  ro.check_first = true;
  DeviceUndo device_undo;
  Node rng_before;
  const bool rng = contains(rep.components, "rng");
  bool rng_restored = false;
  auto undo_step4 = [&] {
    device_undo.apply();
    if (rng_restored) (void)torch_adapter::restore_rng(rng_before, generators_);  // it was valid
    rng_restored = false;
  };
  ro.before_in_place = [&](Node* tree) -> Status {
    Status s = copy_from_tree(plan.targets, /*all=*/false, tree, &device_undo);
    if (s.is_ok() && plan.optimizer_torch_layout) {
      s = prepare_torch_layout_optimizer(tracked_, tree, &plan, &device_undo);
    }
    if (s.is_ok() && rng) {
      s = torch_adapter::capture_rng(generators_, &rng_before);
      if (s.is_ok()) s = torch_adapter::restore_rng(*tree->find_child("rng"), generators_);
      rng_restored = s.is_ok();
    }
    if (s.is_ok() && contains(rep.components, "extra")) {
      s = torch_adapter::restore_extra(*tree->find_child("extra"), extra_);
    }
    if (!s.is_ok()) undo_step4();
    return s;
  };
  Result<Node> read = resume::restore_rank(env_, std::move(rs), ro);
  if (!read.is_ok()) {
    // A failure after before_in_place succeeded (the file changed between the check and the
    // copy, or the copy's read failed) undoes step 4 too; restore_rank's message says what of
    // the live tensors was written.
    if (rng_restored || !device_undo.saved.empty()) undo_step4();
    return read.status();
  }
  Node& tree = *read;

  // 5. Commit.
  if (plan.optimizer) plan.optimizer->commit(*tracked_.optimizer);
  if (plan.scheduler) *tracked_.scheduler = *plan.scheduler;
  if (plan.cursor) tracked_.sampler->set_cursor(*plan.cursor);
  if (contains(rep.components, "train"))
    apply_counters(*tree.find_child("train"), tracked_.counters);
  rep.restored = true;
  CKPT_RETURN_IF_ERROR(journal_restore(rep, plan.cursor ? &*plan.cursor : nullptr));
  return rep;
}

}  // namespace ckpt
