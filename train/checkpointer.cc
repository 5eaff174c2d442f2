#include "train/checkpointer.h"

#include <ATen/detail/CUDAHooksInterface.h>
#include <torch/torch.h>
#include <unistd.h>

#include <chrono>
#include <iostream>

#include "ckpt/base/hash.h"
#include "ckpt/format/manifest.h"
#include "ckpt/format/rank_root.h"
#include "ckpt/io/location.h"
#include "ckpt/loader/resumable_sampler.h"
#include "ckpt/loader/sampler_node.h"
#include "ckpt/sched/scheduler.h"
#include "ckpt/store/journal.h"
#include "ckpt/store/rank_io.h"
#include "ckpt/store/run_dir.h"
#include "ckpt/torch/adapter.h"
#include "ckpt/torch/tensor_convert.h"

namespace ckpt {

std::string environment_digest(std::string* env_json) {
  char host[256] = {0};
  gethostname(host, sizeof host - 1);
  // The CUDA runtime libtorch runs on; "none" on CPU-only builds and machines without a GPU.
  std::string cuda_runtime = "none";
  try {
    if (at::detail::getCUDAHooks().hasCUDA()) {
      const long v = at::detail::getCUDAHooks().versionCUDART();
      cuda_runtime = std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10);
    }
  } catch (const std::exception&) {
    cuda_runtime = "unknown";
  }
  EnvironmentRecord rec;
  rec.libtorch = torch_adapter::libtorch_version();
  rec.toolchain = std::string("gcc ") + __VERSION__;
  rec.cuda_available = torch::cuda::is_available();
  rec.cuda_devices = static_cast<int64_t>(torch::cuda::device_count());
  rec.cuda_runtime = cuda_runtime;
  rec.host = host;
  const std::string text = environment_json(rec);
  if (env_json != nullptr) *env_json = text;
  return hex64(xxh3_64(text.data(), text.size()));
}

namespace {

// A run directory that is a URL must be one this Env serves: never a local folder named "s3:".
Status check_location(Env* env, const std::string& run_dir) {
  if (!looks_like_url(run_dir)) return Status::ok();
  CKPT_RETURN_IF_ERROR(env_for_location(run_dir).status());
  if (env->object_store(run_dir) == nullptr) {
    return invalid_argument(run_dir +
                            ": a URL, but CheckpointerOptions::env is a local file system");
  }
  return Status::ok();
}

}  // namespace

Checkpointer::Checkpointer(CheckpointerOptions options)
    : options_(std::move(options)),
      env_(options_.env ? options_.env : routing_env(Env::posix_direct_io())) {
  options_.run_dir = normalize_location(options_.run_dir);
}

// The destructor-time flush: a save in flight is finished (committed, or its failure journaled by
// the job and reported here, the one place a destructor can say it).
Checkpointer::~Checkpointer() {
  if (saver_ == nullptr || !saver_->in_flight()) return;
  const Status s = wait();
  if (!s.is_ok()) std::cerr << "ckpt: " << s.to_string() << "\n";
}

Status Checkpointer::append_journal(store::JournalEventType type, nlohmann::json event,
                                    bool durable) {
  std::lock_guard<std::mutex> lock(journal_mu_);
  if (!journal_) return Status::ok();
  return journal_->append(type, std::move(event), durable);
}

Status Checkpointer::acquire_lock() {
  CKPT_RETURN_IF_ERROR(check_location(env_, options_.run_dir));
  if (options_.read_only || options_.rank != 0) return Status::ok();
  if (lock_) return lock_->check();
  if (options_.run_dir.empty()) return invalid_argument("Checkpointer: run_dir is empty");
  CKPT_RETURN_IF_ERROR(env_->make_dirs(options_.run_dir));
  CKPT_ASSIGN_OR_RETURN(lock_, store::lock_run_dir(env_, options_.run_dir));
  return Status::ok();
}

std::unique_lock<std::mutex> Checkpointer::take_turn() {
  return lock_ ? std::unique_lock<std::mutex>(lock_->save_mutex()) : std::unique_lock<std::mutex>();
}

Status Checkpointer::check_writable(const char* call) const {
  if (!options_.read_only) return Status::ok();
  return invalid_argument(std::string(call) + ": this Checkpointer of " + options_.run_dir +
                          " is read-only (CheckpointerOptions::read_only)");
}

Status Checkpointer::open_journal() {
  if (options_.read_only) return Status::ok();  // restore_latest of a reader journals nothing
  CKPT_RETURN_IF_ERROR(acquire_lock());
  if (journal_ || options_.rank != 0) return Status::ok();
  CKPT_ASSIGN_OR_RETURN(journal_, store::Journal::open(env_, options_.run_dir));
  return Status::ok();
}

Status Checkpointer::log_start(const RestoreReport& restored, const nlohmann::json& extra) {
  if (!extra.is_object()) return invalid_argument("log_start: extra is not a JSON object");
  CKPT_RETURN_IF_ERROR(check_writable("log_start"));
  CKPT_RETURN_IF_ERROR(open_journal());
  if (!journal_) return Status::ok();
  nlohmann::json info = extra;
  info["fresh"] = !restored.restored;
  info["step"] = restored.step;
  if (!restored.skipped.empty()) info["skipped_damaged"] = restored.skipped;
  if (tracked_.sampler != nullptr) {
    const loader::SamplerSpec& sp = tracked_.sampler->spec();
    info["sampler"] = {{"dataset_size", sp.dataset_size},
                       {"seed", sp.seed},
                       {"shuffle", sp.shuffle},
                       {"drop_last", sp.drop_last},
                       {"world_size", sp.world_size},
                       {"batch_size", sp.batch_size},
                       {"kind", "ckpt"}};
  }
  info["grad_accum"] = tracked_.counters != nullptr ? tracked_.counters->grad_accum_steps : 1;
  if (tracked_.scheduler != nullptr) {
    const sched::ScheduleSpec& sc = tracked_.scheduler->spec();
    info["scheduler"] = {{"kind", sched::schedule_kind_name(sc.kind)},
                         {"base_lr", sc.base_lr},
                         {"warmup_steps", sc.warmup_steps},
                         {"total_steps", sc.total_steps},
                         {"min_lr", sc.min_lr}};
  }
  info["omit"] = component_names(options_.omit);
  info["pid"] = static_cast<int64_t>(getpid());
  return append_journal(store::JournalEventType::kStart, info, true);
}

Status Checkpointer::log_progress(const ProgressEvent& e) {
  CKPT_RETURN_IF_ERROR(check_writable("log_progress"));
  CKPT_RETURN_IF_ERROR(open_journal());
  if (!journal_) return Status::ok();
  nlohmann::json j = {{"step", e.step},         {"lr", e.lr},
                      {"loss", e.loss},         {"epoch", e.epoch},
                      {"position", e.position}, {"samples", e.samples}};
  if (e.batch_digest != 0) j["batch_xxh3"] = hex64(e.batch_digest);
  return append_journal(store::JournalEventType::kProgress, j, false);
}

namespace {

// One LocalShard as a box of "/shards/<name>" (a replica another rank owns: where it is).
Status capture_shard(const LocalShard& s, int64_t rank, Node* node) {
  const std::string where = "save: shard \"" + s.name + "\"";
  if (s.name.empty() || s.name.find('/') != std::string::npos || node->tensors.count(s.name)) {
    return invalid_argument(where + ": the name is empty, has a '/' or is used twice");
  }
  if (s.local == nullptr || !s.local->defined() || !s.local->device().is_cpu() ||
      !s.local->is_contiguous()) {
    return invalid_argument(where + ": local is not a defined, contiguous CPU tensor");
  }
  const bool here = !s.replicated || s.owner == rank;
  Tensor t;
  if (here) {
    CKPT_ASSIGN_OR_RETURN(t, torch_adapter::to_ckpt_tensor(*s.local));
  } else {
    CKPT_ASSIGN_OR_RETURN(t.dtype, torch_adapter::to_ckpt_dtype(s.local->scalar_type()));
  }
  t.box = BoxOf{s.global_shape, s.offsets, s.replicated ? "replicated" : "sharded",
                here ? -1 : s.owner};
  const std::string problem = box_problem(*t.box, here ? t.shape : std::vector<int64_t>{});
  if (!problem.empty()) return invalid_argument(where + ": " + problem);
  node->tensors[s.name] = std::move(t);
  return Status::ok();
}

}  // namespace

std::vector<std::string> Checkpointer::group_names(const std::set<Component>& components) const {
  std::vector<std::string> names = component_names(components);
  if (tracked_.shards != nullptr && !tracked_.shards->empty()) names.push_back(kShardsGroup);
  return names;
}

Status Checkpointer::capture(Node* root, std::set<Component>* components) {
  auto want = [&](Component c) { return options_.omit.count(c) == 0; };
  // The group of `c` in the rank file, recorded as captured.
  auto group = [&](Component c) -> Node& {
    components->insert(c);
    return root->child(component_name(c));
  };
  torch::nn::Module* const model = tracked_.model;
  torch::optim::Optimizer* optimizer = tracked_.optimizer;
  sched::Scheduler* scheduler = tracked_.scheduler;
  loader::ResumableSampler* sampler = tracked_.sampler;
  TrainCounters* counters = tracked_.counters;
  if (model != nullptr) {
    Node& model_node = group(Component::kModel);
    CKPT_RETURN_IF_ERROR(torch_adapter::capture_model(*model, &model_node));
    // model_state names a tied tensor's target within /model; the file records its full path.
    const std::string prefix = std::string("/") + component_name(Component::kModel) + "/";
    for (auto& [name, t] : model_node.tensors) {
      if (!t.alias_of.empty()) t.alias_of = prefix + t.alias_of;
    }
  }
  if (optimizer != nullptr && model != nullptr && want(Component::kOptimizer)) {
    CKPT_RETURN_IF_ERROR(
        torch_adapter::capture_optimizer(*optimizer, *model, &group(Component::kOptimizer)));
  }
  if (scheduler != nullptr && want(Component::kScheduler)) {
    scheduler->to_node(&group(Component::kScheduler));
  }
  if (want(Component::kRng)) {
    CKPT_RETURN_IF_ERROR(torch_adapter::capture_rng(generators_, &group(Component::kRng)));
  }
  if (sampler != nullptr && want(Component::kLoader)) {
    loader::sampler_to_node(sampler->spec(), sampler->cursor(), &group(Component::kLoader));
  }
  if (counters != nullptr && want(Component::kTrain)) {
    Node& t = group(Component::kTrain);
    t.attrs["global_step"] = counters->global_step;
    t.attrs["epoch"] = counters->epoch;
    t.attrs["samples_seen"] = counters->samples_seen;
    t.attrs["tokens_seen"] = counters->tokens_seen;
    t.attrs["grad_accum_steps"] = counters->grad_accum_steps;
    t.attrs["grad_accum_pos"] = counters->grad_accum_pos;
    if (counters->amp_loss_scale != 0) t.attrs["amp_loss_scale"] = counters->amp_loss_scale;
    t.attrs["config_digest"] = hex64(xxh3_64(counters->config.data(), counters->config.size()));
    std::string env_json;
    t.attrs["env_digest"] = environment_digest(&env_json);
    t.attrs["env"] = env_json;
  }
  if (!extra_.values().empty() && want(Component::kExtra)) {
    CKPT_RETURN_IF_ERROR(torch_adapter::capture_extra(extra_, &group(Component::kExtra)));
  }
  if (tracked_.shards != nullptr && !tracked_.shards->empty()) {
    Node& node = root->child(kShardsGroup);
    for (const LocalShard& s : *tracked_.shards) {
      CKPT_RETURN_IF_ERROR(capture_shard(s, options_.rank, &node));
    }
  }
  return Status::ok();
}

Status Checkpointer::check_save_options() const {
  if (options_.rank < 0 || options_.rank >= options_.world_size) {
    return invalid_argument("save: rank " + std::to_string(options_.rank) + " is not in [0, " +
                            std::to_string(options_.world_size) + ")");
  }
  if (options_.omit.count(Component::kModel) != 0) {
    return invalid_argument("save: the model cannot be omitted from a checkpoint");
  }
  if (options_.world_size > 1 && !options_.barrier) {
    return invalid_argument("save: world_size " + std::to_string(options_.world_size) +
                            " needs a barrier (CheckpointerOptions::barrier)");
  }
  return Status::ok();
}

// Step 1 of the protocol: this rank's file, durable.
Status Checkpointer::write_files(Node* root, int64_t step, uint64_t* file_bytes) {
  CKPT_ASSIGN_OR_RETURN(const std::string dir, store::save_dir(env_, options_.run_dir, step));
  CKPT_RETURN_IF_ERROR(env_->make_dirs(dir));
  store::RankWriteStats stats;
  CKPT_RETURN_IF_ERROR(
      store::write_rank(env_, dir, options_.rank, step, options_.world_size, root, &stats)
          .status());
  *file_bytes = stats.file_bytes;
  return Status::ok();
}

// Steps 2-5: barrier, commit (rank 0), barrier, retention; then `event` is journaled as the
// save event (retention's refusals added).
Status Checkpointer::commit_files(int64_t step, const std::set<Component>& components,
                                  nlohmann::json event) {
  if (options_.world_size > 1) {
    CKPT_RETURN_IF_ERROR(options_.barrier().with_context("save barrier"));
  }
  if (options_.rank != 0) return options_.barrier().with_context("commit barrier");
  CKPT_RETURN_IF_ERROR(lock_->check());  // the run directory is still the one this rank locked
  CKPT_RETURN_IF_ERROR(
      store::commit(env_, options_.run_dir, step, options_.world_size, group_names(components)));
  if (options_.world_size > 1)
    CKPT_RETURN_IF_ERROR(options_.barrier().with_context("commit barrier"));
  std::vector<std::string> kept;  // what retention refused to remove, and why
  CKPT_RETURN_IF_ERROR(store::apply_retention(env_, options_.run_dir, options_.keep_last,
                                              options_.keep_every, &kept));
  if (!kept.empty()) event["retention_kept"] = kept;
  return append_journal(store::JournalEventType::kSave, std::move(event), true);
}

// A background save that failed is journaled (durably, best effort: the journal may be what
// failed) before its Status travels to the next save()/wait().
Status Checkpointer::journal_failure(int64_t step, const Status& failed) {
  nlohmann::json event = {
      {"step", step}, {"blocking", false}, {"committed", false}, {"error", failed.to_string()}};
  (void)append_journal(store::JournalEventType::kSave, std::move(event), true);
  return failed;
}

Status Checkpointer::save(int64_t step, const SaveOptions& save_options) {
  const auto t0 = std::chrono::steady_clock::now();
  CKPT_RETURN_IF_ERROR(check_writable("save"));
  CKPT_RETURN_IF_ERROR(check_step(step).with_context("save"));
  CKPT_RETURN_IF_ERROR(check_save_options());
  CKPT_RETURN_IF_ERROR(acquire_lock());
  const bool had_in_flight = saver_ != nullptr && saver_->in_flight();
  CKPT_RETURN_IF_ERROR(wait());  // at most one in flight; a failure of the last one is returned
  const double waited =
      had_in_flight ? std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count()
                    : 0;
  Node root;
  std::set<Component> components;
  CKPT_RETURN_IF_ERROR(capture(&root, &components));
  set_root_attrs({std::string("ckpt ") + kVersion, torch_adapter::libtorch_version(), step,
                  options_.rank, options_.world_size, group_names(components)},
                 &root);
  if (options_.rank == 0) CKPT_RETURN_IF_ERROR(open_journal());
  if (!save_options.blocking) {
    return save_in_background(step, std::move(root), std::move(components), t0, waited);
  }
  uint64_t file_bytes = 0;
  std::unique_lock<std::mutex> turn = take_turn();
  CKPT_RETURN_IF_ERROR(write_files(&root, step, &file_bytes));
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  nlohmann::json event = {{"step", step},
                          {"checkpoint", step_dir_name(step)},
                          {"components", component_names(components)},
                          {"bytes", file_bytes},
                          {"seconds", secs}};
  return commit_files(step, components, std::move(event));
}

// Two journal events: "save" with the checkpoint's name now, on this thread, so it sits after
// the progress events of the state it captured (what `ckpt coverage` pairs it with); and, when
// the background work ends, "save" without a checkpoint name: committed true with bytes and
// seconds, or false with the error.
Status Checkpointer::save_in_background(int64_t step, Node root, std::set<Component> components,
                                        std::chrono::steady_clock::time_point t0, double waited) {
  nlohmann::json taken = {{"step", step},
                          {"checkpoint", step_dir_name(step)},
                          {"components", component_names(components)},
                          {"blocking", false}};
  if (waited > 0) taken["waited_for_previous_seconds"] = waited;
  CKPT_RETURN_IF_ERROR(append_journal(store::JournalEventType::kSave, taken, false));
  if (saver_ == nullptr) saver_ = std::make_unique<store::BackgroundSaver>();
  const double capture_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() - waited;
  // Written by `write` on the background thread, read by `finish` after the saver joined it.
  struct Outcome {
    uint64_t file_bytes = 0;
    double stall_seconds = 0;  // capture + snapshot: what the training loop waited
  };
  auto out = std::make_shared<Outcome>();
  auto done_event = [=] {
    return nlohmann::json{
        {"step", step},
        {"blocking", false},
        {"committed", true},
        {"bytes", out->file_bytes},
        {"stall_seconds", out->stall_seconds},
        {"seconds", std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count()}};
  };
  const bool commit_here = options_.world_size == 1;
  store::BackgroundJob job;
  job.label = "step " + std::to_string(step);
  job.write = [=](Node* tree, const store::SubmitReport& report) -> Status {
    out->stall_seconds = capture_seconds + report.snapshot_seconds;
    std::unique_lock<std::mutex> turn = take_turn();
    Status s = write_files(tree, step, &out->file_bytes);
    if (s.is_ok() && commit_here) s = commit_files(step, components, done_event());
    return s.is_ok() ? s : journal_failure(step, s);
  };
  if (!commit_here) {  // world_size > 1: collectives stay on the training thread
    job.finish = [=]() -> Status {
      std::unique_lock<std::mutex> turn = take_turn();
      Status s = commit_files(step, components, done_event());
      return s.is_ok() ? s : journal_failure(step, s);
    };
  }
  Status s = saver_->submit(std::move(root), std::move(job));
  return s.is_ok() ? s : journal_failure(step, s);
}

Status Checkpointer::wait() {
  if (saver_ == nullptr) return Status::ok();
  return saver_->wait();
}

store::BackgroundSaverStats Checkpointer::background_stats() const {
  return saver_ != nullptr ? saver_->stats() : store::BackgroundSaverStats{};
}

// A damaged checkpoint newer than every intact one is refused (kRefuse) or stepped over and
// recorded in rep->skipped (kFallback).
Status Checkpointer::check_damaged(const std::vector<store::CheckpointEntry>& damaged,
                                   int64_t newest, RestoreReport* rep) const {
  for (const auto& e : damaged) {
    if (options_.on_damaged == OnDamaged::kRefuse) {
      return corrupt(e.dir + ": damaged checkpoint (" + e.problem + "); refusing to " +
                     (newest >= 0 ? "restore the older " + step_dir_name(newest)
                                  : std::string("start from scratch")) +
                     " instead (on_damaged = fallback allows it)");
    }
    rep->skipped.push_back(path_basename(e.dir) + ": " + e.problem);
  }
  return Status::ok();
}

// restore_latest() is in checkpointer_restore.cc.

Status Checkpointer::journal_restore(const RestoreReport& rep, const loader::LoaderCursor* cursor) {
  CKPT_RETURN_IF_ERROR(open_journal());
  if (!journal_) return Status::ok();
  nlohmann::json loader = nullptr;
  if (cursor) loader = {{"epoch", cursor->epoch}, {"position", cursor->position}};
  nlohmann::json event = {{"step", rep.step},
                          {"checkpoint", rep.checkpoint},
                          {"restored", component_names(rep.components)},
                          {"missing", component_names(rep.missing)},
                          {"loader", loader},
                          {"note", rep.note}};
  if (!rep.skipped.empty()) event["skipped"] = rep.skipped;
  return append_journal(store::JournalEventType::kRestore, event, true);
}

}  // namespace ckpt
