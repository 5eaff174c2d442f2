#include "analytics/coverage/hf_run.h"

#include <dirent.h>

#include <algorithm>
#include <cctype>
#include <nlohmann/json.hpp>

#include "analytics/input/json_text.h"
#include "analytics/lr/lr_foreign.h"
#include "ckpt/format/printable.h"
#include "ckpt/io/env.h"

namespace ckpt::analytics {
namespace {

// N of "checkpoint-N", or -1.
int64_t checkpoint_step(const std::string& name) {
  const std::string prefix = "checkpoint-";
  if (name.compare(0, prefix.size(), prefix) != 0 || name.size() == prefix.size() ||
      name.size() > prefix.size() + 15) {
    return -1;
  }
  for (size_t i = prefix.size(); i < name.size(); ++i) {
    if (!std::isdigit(static_cast<unsigned char>(name[i]))) return -1;
  }
  return std::stoll(name.substr(prefix.size()));
}

uint32_t world_size_of(Env* env, const std::string& checkpoint) {
  uint32_t ranks = 0;
  for (const auto& n : env->list_dir_or_empty(checkpoint)) {
    if (n.compare(0, 10, "rng_state_") == 0 && n.size() > 14 &&
        n.compare(n.size() - 4, 4, ".pth") == 0) {
      ++ranks;
    }
  }
  return ranks == 0 ? 1 : ranks;
}

int64_t int_field(const nlohmann::json& doc, const char* key) {
  int64_t v = 0;
  return doc.contains(key) && json_count(doc[key], &v) ? v : 0;
}

std::vector<HfLaunchSteps> launches_of(const ScalarLog& log) {
  std::vector<HfLaunchSteps> out;
  for (const auto& l : log.launches) {
    if (l.samples.empty()) continue;
    HfLaunchSteps s{l.source, l.samples.front().step, l.samples.front().step};
    for (const auto& x : l.samples) {
      s.first_step = std::min(s.first_step, x.step);
      s.last_step = std::max(s.last_step, x.step);
    }
    out.push_back(s);
  }
  return out;
}

}  // namespace

bool is_hf_output_dir(Env* env, const std::string& dir) {
  for (const auto& n : env->list_dir_or_empty(dir)) {
    if (checkpoint_step(n) >= 0 && env->exists(dir + "/" + n + "/trainer_state.json")) return true;
  }
  return false;
}

Result<HfRunFacts> scan_hf_output_dir(Env* env, const std::string& dir) {
  HfRunFacts f;
  f.dir = dir;
  for (const auto& n : env->list_dir_or_empty(dir)) {
    const int64_t step = checkpoint_step(n);
    if (step >= 0 && env->exists(dir + "/" + n + "/trainer_state.json"))
      f.checkpoint_steps.push_back(step);
  }
  if (f.checkpoint_steps.empty()) {
    return not_found(dir + ": no checkpoint-N/ folder with a trainer_state.json");
  }
  std::sort(f.checkpoint_steps.begin(), f.checkpoint_steps.end());
  f.newest_checkpoint = dir + "/checkpoint-" + std::to_string(f.checkpoint_steps.back());
  f.world_size = world_size_of(env, f.newest_checkpoint);
  const std::string state_path = f.newest_checkpoint + "/trainer_state.json";
  CKPT_ASSIGN_OR_RETURN(std::string text, read_text_file(env, state_path, kMaxLogFileBytes));
  CKPT_ASSIGN_OR_RETURN(nlohmann::json state, parse_python_json(text, state_path));
  if (!state.is_object()) return corrupt(state_path + ": expected a JSON object");
  f.global_step = int_field(state, "global_step");
  f.save_steps = int_field(state, "save_steps");
  f.logging_steps = int_field(state, "logging_steps");
  auto log = scalar_log_from_tensorboard(env, dir);
  if (log.is_ok()) {
    f.launches = launches_of(*log);
  } else if (log.status().code() != Code::kNotFound) {
    return log.status();
  }
  return f;
}

Result<DerivedRunSpec> derive_hf_run_spec(const HfRunFacts& facts, const HfTrainingArgs& args,
                                          uint64_t dataset_size) {
  if (dataset_size == 0) {
    return invalid_argument(facts.dir +
                            ": the dataset size is not in a Hugging Face output folder: give "
                            "--dataset-size N (the number of training samples)");
  }
  auto need = [&](const std::optional<int64_t>& v, const char* what) -> Result<uint32_t> {
    if (!v || *v <= 0 || *v > (1 << 30)) {
      return invalid_argument(facts.newest_checkpoint + "/training_args.bin: no usable " + what);
    }
    return static_cast<uint32_t>(*v);
  };
  DerivedRunSpec out;
  SamplerConfig& c = out.spec.sampler;
  c.kind = SamplerKind::kTorchDistributed;
  c.dataset_size = dataset_size;
  c.shuffle = true;
  CKPT_ASSIGN_OR_RETURN(c.batch_size,
                        need(args.per_device_train_batch_size, "per_device_train_batch_size"));
  CKPT_ASSIGN_OR_RETURN(c.grad_accum,
                        need(args.gradient_accumulation_steps, "gradient_accumulation_steps"));
  c.world_size = facts.world_size;
  const std::optional<int64_t> seed = args.data_seed ? args.data_seed : args.seed;
  if (!seed || *seed < 0) {
    return invalid_argument(facts.newest_checkpoint + "/training_args.bin: no seed");
  }
  c.seed = static_cast<uint64_t>(*seed);
  c.drop_last = args.dataloader_drop_last.value_or(false);
  const bool skip_batches = !args.ignore_data_skip.value_or(false);
  out.assumptions.push_back(
      "sampler: transformers >= 4.38 with accelerate's seedable sampler: epoch e is "
      "torch.randperm(N) seeded " +
      std::string(args.data_seed ? "data_seed" : "seed") + " + e = " + std::to_string(c.seed) +
      " + e, global batches consecutive (the run spec's torch_distributed order)");
  out.assumptions.push_back(
      std::string("relaunches ") +
      (skip_batches ? "skip the batches the checkpoint consumed (ignore_data_skip=False)"
                    : "restart their epoch at its first batch (ignore_data_skip=True)"));
  out.assumptions.push_back("world size " + std::to_string(c.world_size) +
                            " from the rng_state files of " + facts.newest_checkpoint);
  if (facts.launches.empty()) {
    out.spec.segments.push_back({0, facts.global_step, false});
    out.assumptions.push_back("no TensorBoard event files: no restart known, one launch of " +
                              std::to_string(facts.global_step) + " steps");
    out.certainty = "uncertain: without the launches' logs, restarts are unknown";
    return out;
  }
  for (size_t k = 0; k < facts.launches.size(); ++k) {
    const HfLaunchSteps& l = facts.launches[k];
    int64_t start = 0;
    if (k > 0) {
      // The newest checkpoint step below the first step this launch logged.
      if (facts.save_steps > 0) {
        start = (l.first_step - 1) / facts.save_steps * facts.save_steps;
      } else {
        for (int64_t s : facts.checkpoint_steps) {
          if (s < l.first_step) start = s;
        }
      }
    }
    if (l.first_step < 1 || l.last_step < start) {
      return corrupt(l.source + ": logged steps " + std::to_string(l.first_step) + ".." +
                     std::to_string(l.last_step) +
                     " are not those of a Trainer launch (global steps count from 1)");
    }
    out.spec.segments.push_back({start, l.last_step, k > 0 && skip_batches});
  }
  out.certainty = facts.logging_steps == 1
                      ? "exact for every step (logging_steps 1: each launch's last step is logged)"
                      : "likely: each launch may have run up to logging_steps - 1 = " +
                            std::to_string(facts.logging_steps - 1) +
                            " steps after its last log, not counted";
  return out;
}

std::string run_spec_json(const RunSpec& spec) {
  const SamplerConfig& c = spec.sampler;
  nlohmann::json j = {{"dataset_size", c.dataset_size},
                      {"batch_size", c.batch_size},
                      {"world_size", c.world_size},
                      {"grad_accum", c.grad_accum},
                      {"sampler",
                       {{"kind", sampler_kind_name(c.kind)},
                        {"seed", c.seed},
                        {"shuffle", c.shuffle},
                        {"drop_last", c.drop_last}}}};
  auto& segs = j["segments"] = nlohmann::json::array();
  for (const auto& s : spec.segments) {
    segs.push_back({{"start_step", s.start_step},
                    {"end_step", s.end_step},
                    {"loader_resumed", s.loader_resumed}});
  }
  return json_text(j, 2);
}

}  // namespace ckpt::analytics
