// The FormatReader for torchtune recipe output folders. torchtune's single-device and
// distributed recipes (full_finetune_*, lora_finetune_*) save at the end of every epoch through a
// checkpointer (FullModelTorchTuneCheckpointer, FullModelHFCheckpointer):
//
//   output_dir/epoch_<N>/model-00001-of-0000K.{bin,safetensors}   N = the 0-based epoch just run
//   output_dir/recipe_state/recipe_state.pt   {optimizer, seed, epochs_run, total_epochs,
//                                              max_steps_per_epoch, dataloader}, overwritten every
//                                              epoch, not written by the last one
//   output_dir/torchtune_config.yaml          the recipe's config
//
// On resume the recipe loads epoch_<epochs_run - 1>'s weights and recipe_state.pt, reseeds with
// `seed` (no generator state is saved), recomputes global_step = epochs_run x steps_per_epoch,
// rebuilds the LR scheduler with last_epoch = global_step - 1 (no scheduler state is saved) and
// starts epoch `epochs_run` afresh with sampler.set_epoch(epochs_run): every save is at an epoch
// boundary, so the loader position follows from the counters. torchtune 0.6's recipes also save
// the StatefulDataLoader's state_dict() but never load it.
#include <algorithm>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "ckpt/io/env.h"
#include "verify/formats/builtin_readers.h"
#include "verify/formats/detect.h"
#include "verify/formats/peft_adapter.h"
#include "verify/formats/safetensors.h"
#include "verify/formats/torch_file.h"

namespace ckpt::verify {
namespace {

constexpr const char* kRecipeState = "recipe_state/recipe_state.pt";

bool ends_with(const std::string& s, const std::string& e) {
  return s.size() >= e.size() && s.compare(s.size() - e.size(), e.size(), e) == 0;
}
bool starts_with(const std::string& s, const std::string& p) {
  return s.compare(0, p.size(), p) == 0;
}

// epoch_<N> folders by N.
std::map<int64_t, std::string> epoch_dirs(Env* env, const std::string& path) {
  std::map<int64_t, std::string> out;
  for (const auto& n : env->list_dir_or_empty(path)) {
    const std::string digits = starts_with(n, "epoch_") ? n.substr(6) : "";
    if (digits.empty() || digits.size() > 9 ||
        digits.find_first_not_of("0123456789") != std::string::npos || !env->is_dir(path + "/" + n))
      continue;
    out[std::stoll(digits)] = n;
  }
  return out;
}

// A checkpointer's model file (not an adapter, not an index).
bool is_model_file(const std::string& n) {
  return starts_with(n, "model-") && (ends_with(n, ".bin") || ends_with(n, ".safetensors"));
}

// What recipe_state.pt says about the run's progress.
struct RecipeState {
  bool read = false;
  std::optional<int64_t> epochs_run, total_epochs, max_steps, seed;
  bool dataloader = false;
};

RecipeState recipe_state_of(const Value& root) {
  RecipeState r;
  r.read = true;
  auto int_at = [&](const char* k) -> std::optional<int64_t> {
    const Value* v = root.get(k);
    return v != nullptr ? v->as_int() : std::nullopt;
  };
  r.epochs_run = int_at("epochs_run");
  r.total_epochs = int_at("total_epochs");
  r.max_steps = int_at("max_steps_per_epoch");
  r.seed = int_at("seed");
  const Value* dl = root.get("dataloader");
  r.dataloader = dl != nullptr && dl->kind == Kind::kDict;
  return r;
}

class TorchtuneReader : public FormatReader {
 public:
  CheckpointFormat format() const override { return CheckpointFormat::kTorchtune; }

  int probe(Env* env, const std::string& path) const override {
    if (!env->is_dir(path)) return 0;
    if (env->exists(path + "/" + kRecipeState)) return 70;
    const auto epochs = epoch_dirs(env, path);
    if (epochs.empty()) return 0;
    for (const auto& n : env->list_dir_or_empty(path + "/" + epochs.rbegin()->second)) {
      if (is_model_file(n)) return env->exists(path + "/torchtune_config.yaml") ? 60 : 30;
    }
    return 0;
  }

  Result<CheckpointView> read(Env* env, const std::string& path,
                              const ReadOptions& options) const override {
    CheckpointView view;
    view.path = path;
    view.format = CheckpointFormat::kTorchtune;
    view.contents.name = path;
    view.contents.kind = "dir";
    std::vector<TorchFile> keep;  // the pickles stay alive while the view is built
    uint64_t bytes = 0;
    RecipeState rs;
    if (env->exists(path + "/" + kRecipeState)) {
      CKPT_ASSIGN_OR_RETURN(bytes, add_torch(env, path, kRecipeState, options, &view, &keep));
      rs = recipe_state_of(*keep.back().doc->root);
    }
    const auto epochs = epoch_dirs(env, path);
    const std::string dir = model_dir(rs, epochs, &view);
    if (!dir.empty()) {
      for (const auto& n : env->list_dir_or_empty(path + "/" + dir)) {
        if (!is_model_file(n)) continue;
        const std::string label = dir + "/" + n;
        if (ends_with(n, ".safetensors")) {
          CKPT_ASSIGN_OR_RETURN(
              uint64_t b, add_safetensors_to_view(env, path + "/" + label, label, &view, options));
          bytes += b;
        } else {
          CKPT_ASSIGN_OR_RETURN(uint64_t b, add_torch(env, path, label, options, &view, &keep));
          bytes += b;
        }
      }
    }
    if (!dir.empty()) CKPT_RETURN_IF_ERROR(note_lora(env, path, dir, options, &view, &bytes));
    if (rs.read) {
      note_counters(rs, &view);
      note_loader(rs, &view);
      note_reseeded(rs, &view);
      note_rebuilt_scheduler(&view);
    } else {
      note_no_recipe_state(dir, &view);
    }
    view.bytes_read = bytes;
    return view;
  }

 private:
  static Result<uint64_t> add_torch(Env* env, const std::string& root, const std::string& label,
                                    const ReadOptions& options, CheckpointView* view,
                                    std::vector<TorchFile>* keep) {
    CKPT_ASSIGN_OR_RETURN(auto file, env->open_random(root + "/" + label));
    const RandomAccessFile* raw = file.get();
    CKPT_ASSIGN_OR_RETURN(TorchFile tf, open_torch_file(std::move(file)));
    add_torch_file_to_view(tf, label, view, options);
    if (options.deep) CKPT_RETURN_IF_ERROR(deep_scan_torch(tf, label, view, options));
    const uint64_t b = raw->bytes_read();
    keep->push_back(std::move(tf));
    return b;
  }

  // LoRA recipes: epoch_N/adapter_model.pt is what a resume loads, over the base model from the
  // config's checkpointer.checkpoint_dir (model-*.safetensors there are merged, for inference).
  static Status note_lora(Env* env, const std::string& path, const std::string& dir,
                          const ReadOptions& options, CheckpointView* view, uint64_t* bytes) {
    const std::string label = dir + "/adapter_model.pt";
    if (!env->exists(path + "/" + label)) return Status::ok();
    const bool merged = view->model.found;
    CheckpointView side;
    std::vector<TorchFile> keep;
    CKPT_ASSIGN_OR_RETURN(uint64_t b,
                          add_torch(env, path, label, options, merged ? &side : view, &keep));
    *bytes += b;
    // The side view only keeps the adapter's tensors apart from the merged model: what its file
    // says about itself (unsafe globals, --deep faults, devices) belongs to the checkpoint.
    view->findings.insert(view->findings.end(), side.findings.begin(), side.findings.end());
    view->devices.insert(side.devices.begin(), side.devices.end());
    const CheckpointView& adapter_view = merged ? side : *view;
    AdapterConfig c;
    c.peft_type = "LORA";
    const std::string config = dir + "/adapter_config.json";
    if (env->exists(path + "/" + config)) {
      CKPT_ASSIGN_OR_RETURN(c, read_adapter_config(env, path + "/" + config));
    }
    std::vector<const TensorInfo*> adapter;
    for (const TensorInfo& t : adapter_view.model.tensors) adapter.push_back(&t);
    const size_t pairs = check_lora_pairs(adapter, c, label, view);
    CKPT_ASSIGN_OR_RETURN(std::string base_dir, config_checkpoint_dir(env, path));
    const std::string base =
        note_base_model(env, base_dir, "torchtune_config.yaml checkpointer.checkpoint_dir", view);
    view->model.evidence +=
        std::string(merged ? " (LoRA merged into the base, for inference)" : "") + " — " + label +
        ": " + std::to_string(adapter.size()) + " tensors" +
        (pairs > 0 ? " (" + std::to_string(pairs) + " lora_a/lora_b pairs)" : "") + ", " +
        describe_adapter(c, config) + ": what a resume loads; " + base;
    return Status::ok();
  }

  // checkpointer.checkpoint_dir of the torchtune_config.yaml the recipe wrote (OmegaConf's
  // block style: "checkpointer:" then two-space-indented keys); empty when absent.
  static Result<std::string> config_checkpoint_dir(Env* env, const std::string& path) {
    const std::string p = path + "/torchtune_config.yaml";
    if (!env->exists(p)) return std::string();
    CKPT_ASSIGN_OR_RETURN(auto f, env->open_random(p));
    if (f->size() > (1u << 20)) return corrupt(p + ": larger than 1 MiB");
    CKPT_ASSIGN_OR_RETURN(std::string text, f->read_string(0, f->size()));
    std::istringstream in(text);
    bool inside = false;
    for (std::string line; std::getline(in, line);) {
      if (!line.empty() && line[0] != ' ') inside = line == "checkpointer:";
      const std::string key = "  checkpoint_dir: ";
      if (inside && starts_with(line, key)) {
        std::string v = line.substr(key.size());
        if (v.size() >= 2 && (v.front() == '\'' || v.front() == '"')) v = v.substr(1, v.size() - 2);
        return v;
      }
    }
    return std::string();
  }

  // The epoch folder a resume loads: epoch_<epochs_run - 1> (the save that wrote recipe_state.pt),
  // else the newest. Empty, with an error finding, when recipe_state.pt's folder is gone.
  static std::string model_dir(const RecipeState& rs, const std::map<int64_t, std::string>& epochs,
                               CheckpointView* view) {
    if (!rs.epochs_run || *rs.epochs_run < 1) {
      return epochs.empty() ? std::string() : epochs.rbegin()->second;
    }
    const int64_t want = *rs.epochs_run - 1;
    auto it = epochs.find(want);
    if (it == epochs.end()) {
      view->findings.push_back({Severity::kError, AuditComponent::kModel,
                                std::string(kRecipeState) + " says epochs_run " +
                                    std::to_string(*rs.epochs_run) +
                                    ", so the resume loads epoch_" + std::to_string(want) +
                                    "/, which is not here: its weights are lost",
                                false});
      return "";
    }
    if (epochs.rbegin()->first > want) {
      view->findings.push_back(
          {Severity::kInfo, AuditComponent::kModel,
           epochs.rbegin()->second + "/ is newer than " + kRecipeState +
               ": torchtune's last epoch writes no recipe state (the run finished); a resume "
               "takes " +
               it->second + "/ with recipe_state.pt",
           false});
    }
    return it->second;
  }

  // epochs_run is the run's counter; the recipe recomputes global_step = epochs_run x
  // steps_per_epoch, which the optimizer's step shows when it is a whole multiple of epochs_run
  // within max_steps_per_epoch.
  static void note_counters(const RecipeState& rs, CheckpointView* view) {
    if (!rs.epochs_run) return;
    CountersPart& c = view->counters;
    c.found = true;
    c.source = kRecipeState;
    c.epoch = static_cast<double>(*rs.epochs_run);
    c.evidence = std::string(kRecipeState) + ": epochs_run " + std::to_string(*rs.epochs_run) +
                 (rs.total_epochs ? " of total_epochs " + std::to_string(*rs.total_epochs) : "") +
                 (rs.max_steps ? ", max_steps_per_epoch " + std::to_string(*rs.max_steps) : "");
    std::optional<double> step;
    for (const auto& ps : view->optimizer.state) {
      if (ps.step) step = ps.step;
    }
    // (a step past 2^53 is no longer an exact integer in a double, and casting one past int64
    // is undefined)
    if (!step || *rs.epochs_run < 1 || !(*step >= 1 && *step <= 9007199254740992.0)) return;
    const auto s = static_cast<int64_t>(*step);
    if (static_cast<double>(s) != *step || s % *rs.epochs_run != 0) return;
    const int64_t per_epoch = s / *rs.epochs_run;
    if (rs.max_steps && per_epoch > *rs.max_steps) return;
    c.global_step = s;
    c.step_key = "epochs_run x steps_per_epoch";
    c.evidence += "; global_step " + std::to_string(s) + " = epochs_run " +
                  std::to_string(*rs.epochs_run) + " x " + std::to_string(per_epoch) +
                  " steps per epoch (the optimizer's step; the recipe recomputes it so on resume)";
  }

  // Every save is at an epoch end: the resume starts epoch epochs_run afresh.
  static void note_loader(const RecipeState& rs, CheckpointView* view) {
    if (!rs.epochs_run || *rs.epochs_run < 1) return;
    LoaderPart& l = view->loader;
    const std::string saved =
        l.found ? " (the dataloader state it also saves, " + l.evidence +
                      ", is not loaded by torchtune 0.6's recipes, and not needed)"
                : "";
    l.found = false;
    l.derived = true;
    l.source = kRecipeState;
    l.kind = "torchtune epoch boundary";
    l.evidence = std::string(kRecipeState) + ": saved at the end of epoch " +
                 std::to_string(*rs.epochs_run - 1) + "; the recipe resumes at epoch " +
                 std::to_string(*rs.epochs_run) + " with sampler.set_epoch(" +
                 std::to_string(*rs.epochs_run) +
                 ") (StatefulDistributedSampler, seed fixed in the recipe), so no position "
                 "inside an epoch is lost" +
                 saved;
    l.derive_cost = "none: the resumed run starts the next epoch afresh";
  }

  static void note_reseeded(const RecipeState& rs, CheckpointView* view) {
    if (view->rng_cpu.found) return;
    view->format_gaps[AuditComponent::kRngCpu] =
        "torchtune's recipes save no generator state" +
        (rs.seed ? ", only seed " + std::to_string(*rs.seed) : std::string()) +
        ": the resumed run calls training.set_seed again (reseeds), so dropout and other random "
        "ops do not continue the run's streams";
  }

  // A configured lr_scheduler writes initial_lr into the groups but is not saved: the recipe
  // rebuilds it from the recomputed global_step.
  static void note_rebuilt_scheduler(CheckpointView* view) {
    if (view->scheduler.found || !view->optimizer.found) return;
    bool scheduled = false;
    for (const auto& g : view->optimizer.groups)
      scheduled = scheduled || g.values.present.count("initial_lr") != 0;
    if (!scheduled) return;
    view->scheduler.recomputed =
        std::string(kRecipeState) +
        ": param_groups have initial_lr (an lr_scheduler was attached), and torchtune saves no "
        "scheduler state: the recipe rebuilds it with last_epoch = epochs_run x steps_per_epoch - "
        "1 on resume";
  }

  static void note_no_recipe_state(const std::string& dir, CheckpointView* view) {
    const std::string why =
        std::string("no ") + kRecipeState +
        ": torchtune writes the optimizer, seed, epochs_run and dataloader state there at the end "
        "of every epoch but the last" +
        (dir.empty() ? std::string() : " (" + dir + "/ holds the model weights only)");
    view->optimizer.evidence = why;
    view->scheduler.evidence = why;
    view->loader.evidence = why;
    view->format_gaps[AuditComponent::kRngCpu] = why;
  }
};

}  // namespace

std::unique_ptr<FormatReader> make_torchtune_reader() {
  return std::make_unique<TorchtuneReader>();
}

}  // namespace ckpt::verify
