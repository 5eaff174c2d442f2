#include "ckpt/train/checkpointer.h"

#include <ATen/detail/CUDAHooksInterface.h>
#include <torch/torch.h>
#include <unistd.h>

#include <chrono>

#include "ckpt/base/hash.h"
#include "ckpt/format/manifest.h"
#include "ckpt/loader/resumable_sampler.h"
#include "ckpt/loader/sampler_node.h"
#include "ckpt/sched/scheduler.h"
#include "ckpt/store/journal.h"
#include "ckpt/store/rank_io.h"
#include "ckpt/store/run_dir.h"
#include "ckpt/torch/adapter.h"

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
  nlohmann::json j = {{"libtorch", torch_adapter::libtorch_version()},
                      {"compiler", std::string("gcc ") + __VERSION__},
                      {"cuda_available", torch::cuda::is_available()},
                      {"cuda_devices", static_cast<int64_t>(torch::cuda::device_count())},
                      {"cuda_runtime", cuda_runtime},
                      {"host", host}};
  const std::string text = j.dump();
  if (env_json != nullptr) *env_json = text;
  return hex64(xxh3_64(text.data(), text.size()));
}

Checkpointer::Checkpointer(CheckpointerOptions options)
    : options_(std::move(options)), env_(options_.env ? options_.env : Env::posix()) {}

Checkpointer::~Checkpointer() = default;

Status Checkpointer::acquire_lock() {
  if (lock_ || options_.rank != 0) return Status::ok();
  if (options_.run_dir.empty()) return invalid_argument("Checkpointer: run_dir is empty");
  CKPT_RETURN_IF_ERROR(env_->make_dirs(options_.run_dir));
  CKPT_ASSIGN_OR_RETURN(lock_, store::lock_run_dir(env_, options_.run_dir));
  return Status::ok();
}

Status Checkpointer::open_journal() {
  CKPT_RETURN_IF_ERROR(acquire_lock());
  if (journal_ || options_.rank != 0) return Status::ok();
  CKPT_ASSIGN_OR_RETURN(journal_, store::Journal::open(env_, options_.run_dir));
  return Status::ok();
}

Status Checkpointer::log_start(const RestoreReport& restored, const nlohmann::json& extra) {
  if (!extra.is_object()) return invalid_argument("log_start: extra is not a JSON object");
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
  return journal_->append(store::JournalEventType::kStart, info, true);
}

Status Checkpointer::log_progress(const ProgressEvent& e) {
  CKPT_RETURN_IF_ERROR(open_journal());
  if (!journal_) return Status::ok();
  nlohmann::json j = {{"step", e.step},         {"lr", e.lr},
                      {"loss", e.loss},         {"epoch", e.epoch},
                      {"position", e.position}, {"samples", e.samples}};
  if (e.batch_digest != 0) j["batch_xxh3"] = hex64(e.batch_digest);
  return journal_->append(store::JournalEventType::kProgress, j, false);
}

Status Checkpointer::capture(Node* root, std::vector<std::string>* components) {
  auto want = [&](Component c) { return options_.omit.count(c) == 0; };
  torch::nn::Module* const model = tracked_.model;
  torch::optim::Optimizer* optimizer = tracked_.optimizer;
  sched::Scheduler* scheduler = tracked_.scheduler;
  loader::ResumableSampler* sampler = tracked_.sampler;
  TrainCounters* counters = tracked_.counters;
  if (model != nullptr) {
    Node& model_node = root->child("model");
    CKPT_RETURN_IF_ERROR(torch_adapter::capture_model(*model, &model_node));
    // model_state names a tied tensor's target within /model; the file records its full path.
    for (auto& [name, t] : model_node.tensors) {
      if (!t.alias_of.empty()) t.alias_of = "/model/" + t.alias_of;
    }
    components->push_back("model");
  }
  if (optimizer != nullptr && model != nullptr && want(Component::kOptimizer)) {
    CKPT_RETURN_IF_ERROR(
        torch_adapter::capture_optimizer(*optimizer, *model, &root->child("optimizer")));
    components->push_back("optimizer");
  }
  if (scheduler != nullptr && want(Component::kScheduler)) {
    scheduler->to_node(&root->child("scheduler"));
    components->push_back("scheduler");
  }
  if (want(Component::kRng)) {
    CKPT_RETURN_IF_ERROR(torch_adapter::capture_rng(generators_, &root->child("rng")));
    components->push_back("rng");
  }
  if (sampler != nullptr && want(Component::kLoader)) {
    loader::sampler_to_node(sampler->spec(), sampler->cursor(), &root->child("loader"));
    components->push_back("loader");
  }
  if (counters != nullptr && want(Component::kTrain)) {
    Node& t = root->child("train");
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
    components->push_back("train");
  }
  if (!extra_.values().empty() && want(Component::kExtra)) {
    CKPT_RETURN_IF_ERROR(torch_adapter::capture_extra(extra_, &root->child("extra")));
    components->push_back("extra");
  }
  return Status::ok();
}

Status Checkpointer::save(int64_t step) {
  const auto t0 = std::chrono::steady_clock::now();
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
  CKPT_RETURN_IF_ERROR(acquire_lock());
  Node root;
  std::vector<std::string> components;
  CKPT_RETURN_IF_ERROR(capture(&root, &components));
  root.attrs["format"] = std::string("ckpt");
  root.attrs["format_version"] = int64_t{1};
  root.attrs["producer"] = std::string("ckpt 0.1.0");
  root.attrs["libtorch_version"] = torch_adapter::libtorch_version();
  root.attrs["step"] = step;
  root.attrs["rank"] = options_.rank;
  root.attrs["world_size"] = options_.world_size;
  root.attrs["components"] = components;

  const std::string dir = path_join(options_.run_dir, step_dir_name(step));
  CKPT_RETURN_IF_ERROR(env_->make_dirs(dir));
  store::RankWriteStats stats;
  CKPT_RETURN_IF_ERROR(
      store::write_rank(env_, dir, options_.rank, step, options_.world_size, &root, &stats)
          .status());
  if (options_.world_size > 1) {
    CKPT_RETURN_IF_ERROR(options_.barrier().with_context("save barrier"));
  }
  if (options_.rank != 0) return options_.barrier().with_context("commit barrier");
  CKPT_RETURN_IF_ERROR(
      store::commit(env_, options_.run_dir, step, options_.world_size, components));
  if (options_.world_size > 1)
    CKPT_RETURN_IF_ERROR(options_.barrier().with_context("commit barrier"));
  std::vector<std::string> kept;  // what retention refused to remove, and why
  CKPT_RETURN_IF_ERROR(store::apply_retention(env_, options_.run_dir, options_.keep_last,
                                              options_.keep_every, &kept));
  CKPT_RETURN_IF_ERROR(open_journal());
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  nlohmann::json event = {{"step", step},
                          {"checkpoint", step_dir_name(step)},
                          {"components", components},
                          {"bytes", stats.file_bytes},
                          {"seconds", secs}};
  if (!kept.empty()) event["retention_kept"] = kept;
  return journal_->append(store::JournalEventType::kSave, event, true);
}

// A damaged checkpoint newer than every intact one is refused (kRefuse) or stepped over and
// recorded in rep->skipped (kFallback).
Status Checkpointer::check_damaged(RestoreReport* rep) {
  if (!env_->is_dir(options_.run_dir)) return Status::ok();
  CKPT_ASSIGN_OR_RETURN(auto all, store::list_checkpoints(env_, options_.run_dir));
  int64_t newest_intact = -1;
  for (const auto& e : all) {
    if (e.committed) newest_intact = e.step;
  }
  for (const auto& e : all) {
    if (!e.damaged || e.step < newest_intact) continue;
    if (options_.on_damaged == OnDamaged::kRefuse) {
      return corrupt(e.dir + ": damaged checkpoint (" + e.problem + "); refusing to " +
                     (newest_intact >= 0 ? "restore the older " + step_dir_name(newest_intact)
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
  nlohmann::json event = {{"step", rep.step},           {"checkpoint", rep.checkpoint},
                          {"restored", rep.components}, {"missing", rep.missing},
                          {"loader", loader},           {"note", rep.note}};
  if (!rep.skipped.empty()) event["skipped"] = rep.skipped;
  return journal_->append(store::JournalEventType::kRestore, event, true);
}

}  // namespace ckpt
