// The FormatReader for Hugging Face Trainer `checkpoint-N/` folders and Accelerate `save_state`
// folders: each file is read by the torch.save / safetensors readers and folded into one view;
// trainer_state.json supplies the counters (HF keeps no loader state: the position is derived
// from global_step by replaying batches), training_args.bin says whether fp16 needs a GradScaler.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <sstream>

#include "ckpt/format/python_json.h"
#include "ckpt/io/env.h"
#include "verify/formats/builtin_readers.h"
#include "verify/formats/detect.h"
#include "verify/formats/peft_adapter.h"
#include "verify/formats/safetensors.h"
#include "verify/formats/torch_file.h"

namespace ckpt::verify {
namespace {

constexpr uint64_t kMaxJsonBytes = 64ull << 20;
constexpr const char* kShardIndex = "model.safetensors.index.json";

bool ends_with(const std::string& s, const std::string& e) {
  return s.size() >= e.size() && s.compare(s.size() - e.size(), e.size(), e) == 0;
}
bool starts_with(const std::string& s, const std::string& p) {
  return s.compare(0, p.size(), p) == 0;
}

// An opaque object's attribute from its BUILD state (TrainingArguments is a dataclass).
const Value* attr(const Value* obj, const std::string& name) {
  if (obj == nullptr || obj->kind != Kind::kObject || obj->state == nullptr) return nullptr;
  return obj->state->get(name);
}

class HfFolderReader : public FormatReader {
 public:
  CheckpointFormat format() const override { return CheckpointFormat::kHfTrainer; }

  int probe(Env* env, const std::string& path) const override {
    if (!env->is_dir(path)) return 0;
    auto names = env->list_dir_or_empty(path);
    auto has = [&](const std::string& n) {
      return std::find(names.begin(), names.end(), n) != names.end();
    };
    if (has("trainer_state.json")) return 80;
    for (const auto& n : names) {
      if (starts_with(n, "random_states_") && ends_with(n, ".pkl")) return 75;
    }
    if (has("optimizer.pt") || has("optimizer.bin") || has("model.safetensors") ||
        has("pytorch_model.bin") || has("scheduler.pt") || has(kShardIndex)) {
      return 40;
    }
    // A PEFT adapter folder as save_pretrained writes it (adapter_config.json + its weights).
    if (has("adapter_config.json") &&
        (has("adapter_model.safetensors") || has("adapter_model.bin"))) {
      return 40;
    }
    return 0;
  }

  Result<CheckpointView> read(Env* env, const std::string& path,
                              const ReadOptions& options) const override {
    CheckpointView view;
    view.path = path;
    view.contents.name = path;
    view.contents.kind = "dir";
    auto names = env->list_dir_or_empty(path);
    auto has = [&](const std::string& n) {
      return std::find(names.begin(), names.end(), n) != names.end();
    };
    // The Trainer writes rng_state*.pth into every checkpoint (but with save_only_model),
    // Accelerate random_states_N.pkl: a Trainer checkpoint without trainer_state.json lost it.
    // (training_args.bin alone does not tell: Trainer.save_model writes it beside the weights.)
    bool trainer = has("trainer_state.json");
    for (const auto& n : names) trainer = trainer || starts_with(n, "rng_state");
    view.format = trainer ? CheckpointFormat::kHfTrainer : CheckpointFormat::kAccelerate;
    if (trainer && !has("trainer_state.json")) {
      view.counters.evidence =
          "trainer_state.json is missing from this Trainer checkpoint (the Trainer writes it into "
          "every one): global_step, epoch and the log history are lost, and with them the "
          "position the Trainer recomputes its loader from";
      view.findings.push_back({Severity::kError, AuditComponent::kCounters,
                               path + "/trainer_state.json is missing (the Trainer writes it into "
                                      "every checkpoint; its rng_state*.pth says this is one)",
                               false});
    }
    bool training_files = false;
    for (const auto& n : names) {
      training_files = training_files || starts_with(n, "optimizer") ||
                       starts_with(n, "random_states_") || starts_with(n, "scheduler") ||
                       n == "trainer_state.json";
    }
    if (!training_files)
      view.format = CheckpointFormat::kHfModel;  // save_pretrained: weights + config
    std::vector<std::string> rng_ranks_ok, rng_ranks_bad;
    uint64_t bytes = 0;
    int rng_files = 0;
    std::vector<const Value*> roots;
    std::vector<TorchFile> keep;  // the pickles stay alive while the view is built
    for (const auto& n : names) {
      const std::string p = path + "/" + n;
      if (env->is_dir(p)) continue;
      if (ends_with(n, ".safetensors")) {
        CKPT_ASSIGN_OR_RETURN(uint64_t b, add_safetensors_to_view(env, p, n, &view, options));
        bytes += b;
        continue;
      }
      const bool torch_like = ends_with(n, ".pt") || ends_with(n, ".pth") || ends_with(n, ".bin") ||
                              (starts_with(n, "random_states_") && ends_with(n, ".pkl")) ||
                              (starts_with(n, "custom_checkpoint_") && ends_with(n, ".pkl"));
      if (!torch_like) continue;
      CKPT_ASSIGN_OR_RETURN(auto file, env->open_random(p));
      const RandomAccessFile* raw = file.get();
      CKPT_ASSIGN_OR_RETURN(TorchFile tf, open_torch_file(std::move(file)));
      if (starts_with(n, "rng_state") || starts_with(n, "random_states_")) {
        ++rng_files;
        // Every rank's file is checked, not only the first one detection sees.
        CheckpointView one;
        add_torch_file_to_view(tf, n, &one, options);
        (one.rng_cpu.found && one.rng_cpu.nbytes == 5056 ? rng_ranks_ok : rng_ranks_bad)
            .push_back(n);
      }
      add_torch_entry(n, tf, options, &view);
      if (options.deep) CKPT_RETURN_IF_ERROR(deep_scan_torch(tf, n, &view, options));
      bytes += raw->bytes_read();
      keep.push_back(std::move(tf));
    }
    if (has("trainer_state.json"))
      CKPT_RETURN_IF_ERROR(read_trainer_state(env, path + "/trainer_state.json", &view));
    if (has(kShardIndex)) CKPT_RETURN_IF_ERROR(check_shard_index(env, path, &view));
    CKPT_RETURN_IF_ERROR(note_peft_adapter(env, path, names, &view));
    note_rng_ranks(rng_ranks_ok, rng_ranks_bad, &view);
    note_accelerate_processes(rng_ranks_ok, rng_ranks_bad, &view);
    note_format_gaps(rng_files, &view);
    note_fp16_off_gpu(rng_files, &view);
    view.bytes_read = bytes;
    return view;
  }

 private:
  // One torch.save file of the folder, by its role: training_args.bin (fp16, config digest), an
  // empty scaler file, a sampler / loader state, Accelerate's random_states_N.pkl, or any other.
  static void add_torch_entry(const std::string& n, const TorchFile& tf, const ReadOptions& options,
                              CheckpointView* view) {
    if (n == "training_args.bin") {
      read_training_args(tf.doc->root, view);
      view->config_digest = value_digest(*tf.doc->root);
      add_global_findings(*tf.doc, n, view);
      if (options.inspect) {
        size_t budget = 2000;
        view->contents.children.push_back(inspect_value(*tf.doc->root, n, &budget));
      }
    } else if (starts_with(n, "scaler") && tf.doc->root->kind == Kind::kDict &&
               tf.doc->root->entries.empty()) {
      view->grad_scaler.found = true;
      view->grad_scaler.empty = true;
      view->grad_scaler.source = n;
      view->grad_scaler.evidence = n + ": {} (the GradScaler was disabled when saved)";
      add_torch_file_to_view(tf, n, view, options);
    } else if (n == "sampler.bin" || starts_with(n, "sampler_") ||
               starts_with(n, "dl_state_dict")) {
      add_torch_file_to_view(tf, n, view, options);
      if (!view->loader.found) {
        view->loader.found = true;
        view->loader.source = n;
        view->loader.kind = starts_with(n, "dl_state_dict") ? "StatefulDataLoader" : "sampler";
        view->loader.evidence = n + ": " +
                                (view->loader.kind == "sampler"
                                     ? "pickled sampler object (" + tf.doc->root->qualname() + ")"
                                     : "stateful dataloader state");
      }
    } else if (starts_with(n, "custom_checkpoint_")) {
      // Accelerator.register_for_checkpointing(obj): obj.state_dict(), restored by load_state.
      add_torch_file_to_view(tf, n, view, options);
      const Value& root = *tf.doc->root;
      std::string what = summarize(root);
      if (root.kind == Kind::kDict && !root.entries.empty()) {
        what.clear();
        for (size_t i = 0; i < root.entries.size() && i < 6; ++i) {
          const auto& [k, v] = root.entries[i];
          what += (i ? ", " : "") + (k->kind == Kind::kStr ? k->s : summarize(*k)) + " " +
                  summarize(*v);
        }
        if (root.entries.size() > 6) what += ", ...";
      }
      view->findings.push_back(
          {Severity::kInfo, std::nullopt,
           n + ": an object registered with Accelerator.register_for_checkpointing (" + what +
               "); load_state() restores it",
           false});
    } else if (starts_with(n, "random_states_")) {
      // Its "step" is Accelerator.step (a gradient-accumulation counter), not the training
      // step: keep it out of the counters.
      CountersPart before = view->counters;
      add_torch_file_to_view(tf, n, view, options);
      view->counters = before;
    } else {
      add_torch_file_to_view(tf, n, view, options);
    }
  }

  // What a save_pretrained folder cannot hold, and what the HF Trainer derives or lacks.
  static void note_format_gaps(int rng_files, CheckpointView* view) {
    if (view->format == CheckpointFormat::kHfModel) {
      view->model.weights_only_format = true;
      mark_weights_only("a save_pretrained model folder holds weights and config only", view);
    }
    if (view->format == CheckpointFormat::kHfTrainer && !view->loader.found) {
      const auto gs = view->counters.global_step;
      view->loader.derived = gs.has_value();
      view->loader.kind = "derived from global_step";
      view->loader.evidence =
          "HF Trainer saves no loader state; on resume it recomputes the position from "
          "trainer_state.json global_step" +
          (gs ? " " + std::to_string(*gs) : std::string()) + " and the sampler seed";
      view->loader.derive_cost =
          "the resumed run re-reads and discards (global_step mod steps_per_epoch) x "
          "gradient_accumulation_steps batches of the current epoch through the data pipeline "
          "(decode + collate, no forward), and the position is only right if dataset, batch size, "
          "world size and seed are unchanged";
    }
    if (view->format == CheckpointFormat::kHfTrainer && rng_files == 0) {
      view->rng_cpu.evidence = "no rng_state.pth / rng_state_<rank>.pth in the folder";
    }
  }

  // fp16=True without a scaler file: the Trainer's Accelerator makes a GradScaler only on a GPU
  // (on the CPU, fp16 autocast runs without loss scaling), so a run whose every rng_state file
  // lacks a CUDA state (or whose TrainingArguments say use_cpu) needs none.
  static void note_fp16_off_gpu(int rng_files, CheckpointView* view) {
    if (!view->mixed_precision || view->grad_scaler.found) return;
    if (view->format != CheckpointFormat::kHfTrainer) return;
    if (view->no_scaler_reason.empty() && rng_files > 0 && view->rng_cpu.found &&
        !view->rng_cuda.found) {
      view->no_scaler_reason =
          "the run was on the CPU (its rng_state file holds no CUDA generator state)";
    }
    if (!view->no_scaler_reason.empty()) {
      view->no_scaler_reason = view->mixed_precision_evidence + ", but " + view->no_scaler_reason +
                               ": Accelerate creates no GradScaler off the GPU, so there is no "
                               "loss scale to save";
    }
  }

  // The rank N of "<prefix>N<suffix>" (rng_state_3.pth), or nullopt.
  static std::optional<int> rank_of(const std::string& n, const std::string& prefix,
                                    const std::string& suffix) {
    if (!starts_with(n, prefix) || !ends_with(n, suffix)) return std::nullopt;
    const std::string digits = n.substr(prefix.size(), n.size() - prefix.size() - suffix.size());
    if (digits.empty() || digits.size() > 6 ||
        digits.find_first_not_of("0123456789") != std::string::npos)
      return std::nullopt;
    return std::stoi(digits);
  }

  // The ranks of the per-rank RNG files of one family (rng_state_N.pth or random_states_N.pkl).
  static std::set<int> ranks_of(const std::vector<std::string>& ok,
                                const std::vector<std::string>& bad, const std::string& prefix,
                                const std::string& suffix) {
    std::set<int> ranks;
    for (const auto* list : {&ok, &bad}) {
      for (const auto& n : *list) {
        if (auto r = rank_of(n, prefix, suffix)) ranks.insert(*r);
      }
    }
    return ranks;
  }

  // Per-rank files must run 0..N-1: one missing below the highest is a rank that resumes with a
  // fresh RNG. The Trainer writes rng_state.pth when world_size is 1 and
  // rng_state_<process_index>.pth otherwise, so a lone rng_state_0.pth means the other ranks'
  // files are gone (Accelerate names its file random_states_0.pkl in a 1-process run too).
  static void note_missing_rng_ranks(const std::vector<std::string>& ok,
                                     const std::vector<std::string>& bad, CheckpointView* view) {
    for (const auto& [prefix, suffix] :
         {std::pair<std::string, std::string>{"rng_state_", ".pth"}, {"random_states_", ".pkl"}}) {
      const std::set<int> ranks = ranks_of(ok, bad, prefix, suffix);
      if (ranks.empty()) continue;
      std::vector<int> missing;
      for (int r = 0; r <= *ranks.rbegin(); ++r) {
        if (ranks.count(r) == 0) missing.push_back(r);
      }
      std::string message;
      if (!missing.empty()) {
        message = prefix + std::to_string(missing.front()) + suffix + " is missing (" +
                  std::to_string(missing.size()) + " of ranks 0.." +
                  std::to_string(*ranks.rbegin()) + "): that rank resumes with a fresh RNG";
      } else if (prefix == "rng_state_" && ranks.size() == 1 && *ranks.begin() == 0) {
        message =
            "only rng_state_0.pth: the Trainer names it so only when world_size > 1 "
            "(rng_state.pth otherwise), so the other ranks' rng_state_<rank>.pth are missing: "
            "those ranks resume with fresh RNG";
      }
      if (!message.empty())
        view->findings.push_back({Severity::kError, AuditComponent::kRngCpu, message, true});
    }
  }

  // Accelerate: every process writes random_states_<process_index>.pkl, and a prepared
  // scheduler (AcceleratedScheduler, split_batches=False) steps the wrapped one once per process
  // per optimizer step, so last_epoch = num_processes x step says how many processes saved. The
  // scheduler is judged at that cadence, and each of those ranks must have left its RNG file.
  static void note_accelerate_processes(const std::vector<std::string>& ok,
                                        const std::vector<std::string>& bad, CheckpointView* view) {
    if (view->format != CheckpointFormat::kAccelerate || !view->scheduler.found ||
        !view->scheduler.last_epoch)
      return;
    std::optional<double> step;
    for (const auto& ps : view->optimizer.state) {
      if (!ps.step || (step && *step != *ps.step)) return;  // no common optimizer step
      step = ps.step;
    }
    std::string what = "optimizer step";
    if (!step && view->counters.global_step) {
      step = static_cast<double>(*view->counters.global_step);
      what = "global_step";
    }
    const int64_t le = *view->scheduler.last_epoch;
    if (!step || *step < 1 || *step > 1e15 || std::floor(*step) != *step) return;
    const int64_t st = static_cast<int64_t>(*step);
    if (le % st != 0 || le / st < 2 || le / st > 65536) return;
    const int64_t k = le / st;
    const std::set<int> ranks = ranks_of(ok, bad, "random_states_", ".pkl");
    if (!ranks.empty() && *ranks.rbegin() >= k) return;  // files of more ranks than it says
    const std::string inference = view->scheduler.source + " last_epoch " + std::to_string(le) +
                                  " = " + std::to_string(k) + " x " + what + " " +
                                  std::to_string(st) +
                                  ": Accelerate steps a prepared scheduler once per process, so " +
                                  std::to_string(k) + " processes saved";
    view->scheduler.steps_per_step = k;
    view->scheduler.evidence += "; " + inference;
    for (SchedulerPart& s : view->more_schedulers) s.steps_per_step = k;
    std::string missing, who, here;
    int n_missing = 0;
    for (int r = 0; r < k; ++r) {
      const std::string f = "random_states_" + std::to_string(r) + ".pkl";
      if (ranks.count(r) != 0) {
        here += (here.empty() ? "" : ", ") + f;
      } else if (++n_missing <= 4) {
        missing += (missing.empty() ? "" : ", ") + f;
        who += (who.empty() ? "" : ", ") + std::to_string(r);
      }
    }
    if (n_missing == 0) return;
    if (n_missing > 4) missing += ", ...";
    view->findings.push_back(
        {Severity::kError, AuditComponent::kRngCpu,
         missing + (n_missing == 1 ? " is" : " are") + " missing (" + std::to_string(n_missing) +
             " of " + std::to_string(k) + " per-process RNG files): " + inference +
             (here.empty()
                  ? ", but none of them is here"
                  : ", but only " + here + (ranks.size() == 1 ? " is here" : " are here")) +
             "; on resume rank" + (n_missing == 1 ? " " : "s ") + who +
             (n_missing > 4 ? ", ..." : "") + (n_missing == 1 ? " starts" : " start") +
             " from a fresh RNG (dropout masks and data shuffles no longer follow the "
             "run's)",
         true});
  }

  // Several processes each save rng_state_<rank>.pth: every one must hold a CPU generator state.
  static void note_rng_ranks(const std::vector<std::string>& ok,
                             const std::vector<std::string>& bad, CheckpointView* view) {
    note_missing_rng_ranks(ok, bad, view);
    if (ok.size() + bad.size() < 2) return;
    std::string all;
    for (const auto& n : ok) all += (all.empty() ? "" : ", ") + n;
    view->rng_cpu.evidence += "; " + std::to_string(ok.size() + bad.size()) +
                              " per-rank RNG files, each checked: " + all +
                              (bad.empty() ? "" : " hold a 5056-byte CPU state");
    for (const auto& n : bad) {
      view->findings.push_back({Severity::kError, AuditComponent::kRngCpu,
                                n + ": no 5056-byte CPU generator state (that rank's RNG is lost)",
                                true});
    }
  }

  // model.safetensors.index.json: every shard it names must exist and hold the tensors the
  // weight_map assigns to it (a failed copy leaves a folder that loads with missing weights).
  static Status check_shard_index(Env* env, const std::string& dir, CheckpointView* view) {
    const std::string p = dir + "/" + kShardIndex;
    CKPT_ASSIGN_OR_RETURN(auto f, env->open_random(p));
    if (f->size() > kMaxJsonBytes) return corrupt(p + ": larger than 64 MiB");
    CKPT_ASSIGN_OR_RETURN(std::string text, f->read_string(0, f->size()));
    nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
    if (j.is_discarded() || !j.is_object() || !j.contains("weight_map") ||
        !j["weight_map"].is_object()) {
      return corrupt(p + ": not a shard index (no weight_map object)");
    }
    std::map<std::string, std::set<std::string>> by_shard;  // shard → tensors it must hold
    for (const auto& [name, shard] : j["weight_map"].items()) {
      if (shard.is_string()) by_shard[shard.get<std::string>()].insert(name);
    }
    std::map<std::string, std::set<std::string>> held;  // shard → tensors found in it
    for (const auto& t : view->model.tensors) held[t.file].insert(t.name);
    size_t missing_shards = 0, missing_tensors = 0;
    for (const auto& [shard, names] : by_shard) {
      auto it = held.find(shard);
      if (it == held.end()) {
        ++missing_shards;
        missing_tensors += names.size();
        view->findings.push_back({Severity::kError, AuditComponent::kModel,
                                  std::string(kShardIndex) + " names " + shard + " (" +
                                      std::to_string(names.size()) + " tensors, first \"" +
                                      *names.begin() + "\"), which is missing from the folder",
                                  true});
        continue;
      }
      for (const auto& n : names) {
        if (it->second.count(n) != 0) continue;
        ++missing_tensors;
        view->findings.push_back(
            {Severity::kError, AuditComponent::kModel,
             shard + ": lacks tensor \"" + n + "\" that " + kShardIndex + " assigns to it", true});
      }
    }
    view->model.evidence += "; " + std::string(kShardIndex) + ": " +
                            std::to_string(by_shard.size()) + " shards, " +
                            std::to_string(j["weight_map"].size()) + " tensors" +
                            (missing_shards + missing_tensors == 0
                                 ? ", every shard present with its tensors"
                                 : ", " + std::to_string(missing_shards) + " shard(s) and " +
                                       std::to_string(missing_tensors) + " tensor(s) missing");
    return Status::ok();
  }

  static void read_training_args(const Value* root, CheckpointView* view) {
    auto on = [root](const char* name) {
      const Value* v = attr(root, name);
      return v != nullptr && v->kind == Kind::kBool && v->b;
    };
    // use_cpu (transformers >= 4.36), no_cuda before it
    const char* cpu = on("use_cpu") ? "use_cpu" : on("no_cuda") ? "no_cuda" : nullptr;
    if (cpu != nullptr)
      view->cpu_only_reason = std::string("training_args.bin says ") + cpu + "=True";
    if (on("fp16")) {
      view->mixed_precision = true;
      view->mixed_precision_evidence = "training_args.bin: fp16=True";
      if (cpu != nullptr) view->no_scaler_reason = view->cpu_only_reason;
    }
  }

  static Status read_trainer_state(Env* env, const std::string& p, CheckpointView* view) {
    CKPT_ASSIGN_OR_RETURN(auto f, env->open_random(p));
    if (f->size() > kMaxJsonBytes) return corrupt(p + ": trainer_state.json is larger than 64 MiB");
    CKPT_ASSIGN_OR_RETURN(std::string text, f->read_string(0, f->size()));
    // Python's json.dumps writes NaN / Infinity literals: null, outside strings only, in one pass.
    auto parsed = parse_python_json(text, p);
    nlohmann::json j = parsed.is_ok() ? std::move(parsed).value() : nlohmann::json();
    if (!j.is_object()) return corrupt(p + ": trainer_state.json is not a JSON object");
    CountersPart& c = view->counters;
    if (j.contains("global_step") && j["global_step"].is_number_integer()) {
      c.found = true;
      c.global_step = j["global_step"].get<int64_t>();
      c.evidence = "trainer_state.json: global_step " + std::to_string(*c.global_step);
    }
    if (j.contains("epoch") && j["epoch"].is_number()) {
      c.found = true;
      c.epoch = j["epoch"].get<double>();
      std::ostringstream o;
      o << ", epoch " << *c.epoch;
      c.evidence += o.str();
    }
    c.source = "trainer_state.json";
    // Evaluations: log_history entries with an eval_ metric (what a ReduceLROnPlateau stepped
    // on evaluation counts).
    if (j.contains("log_history") && j["log_history"].is_array()) {
      int64_t evals = 0;
      for (const auto& e : j["log_history"]) {
        if (!e.is_object()) continue;
        bool eval = false;
        for (const auto& [k, v] : e.items())
          eval = eval || (k.rfind("eval_", 0) == 0 && v.is_number());
        evals += eval ? 1 : 0;
      }
      c.evaluations = evals;
    }
    InspectNode n{"trainer_state.json",
                  "file",
                  "global_step " + (c.global_step ? std::to_string(*c.global_step) : "?") + ", " +
                      std::to_string(j.value("log_history", nlohmann::json::array()).size()) +
                      " log entries",
                  "",
                  {},
                  0,
                  "",
                  {}};
    view->contents.children.push_back(std::move(n));
    return Status::ok();
  }
};

}  // namespace

std::unique_ptr<FormatReader> make_hf_folder_reader() { return std::make_unique<HfFolderReader>(); }

}  // namespace ckpt::verify
