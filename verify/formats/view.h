// CheckpointView: the format-independent picture of one checkpoint that every format reader
// produces and the audit rules consume.
//
// A reader (torch.save zip, safetensors, HF/Accelerate folder, Lightning, DCP, our own HDF5 format
// from verify/ours) fills one Part per component of the completeness contract with what it found
// and the evidence ("optimizer.pt: state for 4 params, 1 param group"), plus the facts the
// consistency rules need (steps, LRs, RNG sizes, tensor devices). It decides nothing: statuses and
// consequences are the rules' job (verify/audit/rules.h), so every format is judged the same way.
// `contents` is the `ckpt inspect` tree. A view is a plain value: built by one thread, then
// read-only.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "ckpt/format/any_dtype.h"
#include "ckpt/format/component.h"
#include "verify/formats/knowledge.h"

namespace ckpt::verify {

using ckpt::AuditComponent;

// The formats the readers tell apart; the names are contracts (`ckpt audit --json` "format",
// `ckpt convert`'s source_format attribute): never rename one.
enum class CheckpointFormat {
  kTorchSave,          // "torch.save"
  kLightning,          // "lightning"
  kSafetensors,        // "safetensors"
  kHfTrainer,          // "hf-trainer": checkpoint-N/ with trainer_state.json
  kAccelerate,         // "accelerate": save_state folders
  kHfModel,            // "hf-model": save_pretrained weights and config only
  kDcp,                // "dcp"
  kDeepSpeed,          // "deepspeed"
  kMegatron,           // "megatron": iter_N/mp_rank_XX/
  kMegatronTorchDist,  // "megatron-torch_dist"
  kCkptH5,             // "ckpt-h5": our own format
  kTorchtune,          // "torchtune": a recipe's output_dir (epoch_N/ + recipe_state/)
  kDcpHfShards,        // "dcp-hf-shards": HuggingFaceStorageWriter(save_distributed=True) shards
};

constexpr const char* format_name(CheckpointFormat f) {
  switch (f) {
    case CheckpointFormat::kTorchSave:
      return "torch.save";
    case CheckpointFormat::kLightning:
      return "lightning";
    case CheckpointFormat::kSafetensors:
      return "safetensors";
    case CheckpointFormat::kHfTrainer:
      return "hf-trainer";
    case CheckpointFormat::kAccelerate:
      return "accelerate";
    case CheckpointFormat::kHfModel:
      return "hf-model";
    case CheckpointFormat::kDcp:
      return "dcp";
    case CheckpointFormat::kDeepSpeed:
      return "deepspeed";
    case CheckpointFormat::kMegatron:
      return "megatron";
    case CheckpointFormat::kMegatronTorchDist:
      return "megatron-torch_dist";
    case CheckpointFormat::kCkptH5:
      return "ckpt-h5";
    case CheckpointFormat::kTorchtune:
      return "torchtune";
    case CheckpointFormat::kDcpHfShards:
      return "dcp-hf-shards";
  }
  return "?";
}

// A reader finding's severity: error, warning, info (the names are contracts, as above).
enum class Severity { kError, kWarning, kInfo };

constexpr const char* severity_name(Severity s) {
  switch (s) {
    case Severity::kError:
      return "error";
    case Severity::kWarning:
      return "warning";
    case Severity::kInfo:
      return "info";
  }
  return "?";
}

struct TensorInfo {
  std::string name;  // "0.weight", "state.3.exp_avg"
  AnyDType dtype;    // "float32", "uint8"; other: "numpy <u4"
  std::vector<int64_t> shape;
  std::string device;  // "cpu", "cuda:0", "meta", "" when the format does not say
  std::string file;    // file that holds the bytes
  std::string record;  // zip record / dataset / storage key ("archive/data/0")
  uint64_t nbytes = 0;
  // The elements in row-major order, when asked for (ReadOptions::tensor_values) and the format
  // lets the reader take them without copying views apart; null otherwise.
  std::shared_ptr<const std::string> values = nullptr;
};

// One node of `ckpt inspect`: a key, its kind and a one-line summary; tensors add dtype/shape.
struct InspectNode {
  std::string name;
  std::string kind;     // "file", "dir", "dict", "list", "tensor", "int", "object", ...
  std::string summary;  // "42", "float32 [8, 4] 128 B cpu", "transformers.TrainingArguments"
  std::string dtype;
  std::vector<int64_t> shape;
  uint64_t nbytes = 0;
  std::string device;
  std::vector<InspectNode> children;
};

struct Part {
  bool found = false;
  std::string evidence;  // where and what; also filled when not found but something relevant was
  std::string source;    // file it came from
};

struct ModelPart : Part {
  std::vector<TensorInfo> tensors;
  bool weights_only_format = false;  // safetensors / TorchScript: by design nothing else
};

struct OptimizerPart : Part {
  std::string name;  // where it was found ("opt_g", "optimizer_states[1]"); pairs schedulers
  std::string kind;  // "Adam/AdamW", "SGD", ... (identity.label(), or a reader's own word)
  // The class from the knowledge table (verify/formats/knowledge.h): from a pickle GLOBAL or
  // the state's shape, and how (identity.how, quoted in the evidence).
  OptimizerIdentity identity;
  struct Group {
    std::vector<int64_t> params;
    std::optional<double> lr;
    std::optional<double> momentum;
    GroupValues values;          // every hyperparameter, for the table's conditions
    std::optional<double> step;  // a step count kept in the group (timm Lamb, FusedAdam)
  };
  std::vector<Group> groups;
  struct ParamState {
    int64_t id = 0;
    std::map<std::string, TensorInfo> tensors;  // exp_avg, exp_avg_sq, momentum_buffer, ...
    std::set<std::string> keys;    // every state key, tensors or not (LBFGS's n_iter is an int)
    std::optional<double> step;    // int, float or resolved 0-dim tensor
    bool step_unreadable = false;  // a step tensor whose value was not read
  };
  std::vector<ParamState> state;
  // State entries keyed by something other than a parameter (MADGRAD's state["k"]).
  std::vector<std::string> extra_state;
  int count = 0;  // optimizers found (Lightning: one per configure_optimizers entry)
  std::set<std::string> zero_moments;  // --deep: all-zero moment tensors
  std::set<std::string> nonfinite;     // --deep: moment tensors with NaN/Inf
};

struct SchedulerPart : Part {
  std::string name;  // where it was found ("sched_g", "lr_schedulers[0]")
  std::string kind;
  const SchedulerClass* klass = nullptr;  // its knowledge-table row, when identified
  std::optional<int64_t> last_epoch;      // its own step count (mmengine: last_step)
  std::optional<int64_t> step_count;
  std::vector<double> base_lrs;
  std::vector<double> last_lr;
  bool per_epoch = false;  // ReduceLROnPlateau and Lightning interval="epoch" count epochs
  // No scheduler object, but the loop recomputes the LR from a counter (nanoGPT's
  // get_lr(iter_num), timm's epoch-based schedulers): what says so. The rules call the
  // scheduler derived when the counter is saved.
  std::string recomputed;
  // Scheduler steps per training step: Accelerate's prepared scheduler steps once per process
  // (split_batches=False), so last_epoch is num_processes x the step. Set by the reader that
  // established it (and said so in the evidence).
  int64_t steps_per_step = 1;
};

struct RngCpuPart : Part {
  int64_t nbytes = -1;
  bool numpy = false;
  bool python = false;
};

struct RngCudaPart : Part {
  std::vector<int64_t> nbytes;  // one per device
};

struct LoaderPart : Part {
  bool derived = false;     // position recomputed from counters (HF Trainer)
  std::string derive_cost;  // what recomputing it costs
  std::string kind;         // "StatefulDataLoader", "cursor", "Lightning loops", ...
  std::optional<int64_t> samples;
  std::optional<int64_t> batches;
  std::optional<int64_t> epoch;
};

struct CountersPart : Part {
  std::optional<int64_t> global_step;
  std::optional<double> epoch;
  std::string step_key;  // the name the step counter was saved under ("iter_num", "meta.iter")
  // Evaluations the run made (HF trainer_state.json log_history entries with eval_ metrics):
  // a ReduceLROnPlateau stepped on evaluation counts these.
  std::optional<int64_t> evaluations;
  // scheduler.step() calls the training loop made, all schedulers together, when the loop counts
  // them (Lightning: loops.fit_loop["epoch_loop.scheduler_progress"].total.completed, kept
  // across resumes); where it was read.
  std::optional<int64_t> scheduler_steps;
  std::string scheduler_steps_source;
};

struct GradScalerPart : Part {
  bool empty = false;  // {} = GradScaler disabled when saved
  std::optional<double> scale;
};

// A fact a reader established that the rules must surface: a CRC failure, NaN in a weight, an
// unsafe global, a format note ("Lightning saves no RNG"). `inconsistent` marks the component.
struct ReaderFinding {
  Severity severity = Severity::kError;
  std::optional<AuditComponent> component;  // nullopt for the file as a whole
  std::string message;
  bool inconsistent = false;
};

struct CheckpointView {
  std::string path;
  CheckpointFormat format = CheckpointFormat::kTorchSave;
  ModelPart model;
  OptimizerPart optimizer;  // the first found; `optimizer.count` says how many there are
  SchedulerPart scheduler;  // the first found
  // The second and later optimizers and schedulers (GAN loops, Lightning's lists), in the order
  // found; the rules audit each and pair every scheduler with its optimizer.
  std::vector<OptimizerPart> more_optimizers;
  std::vector<SchedulerPart> more_schedulers;
  RngCpuPart rng_cpu;
  RngCudaPart rng_cuda;
  LoaderPart loader;
  CountersPart counters;
  GradScalerPart grad_scaler;
  bool mixed_precision = false;  // fp16 autocast with a GradScaler expected
  std::string mixed_precision_evidence;
  // fp16 was asked for but the run was on the CPU, where the library makes no GradScaler (HF
  // Trainer / Accelerate): why the rules do not expect one.
  std::string no_scaler_reason;
  // A saved config says the run used no CUDA device ("training_args.bin says use_cpu=True"):
  // rng_cuda is then not_applicable even in a format that records no devices.
  std::string cpu_only_reason;
  std::set<std::string> devices;  // every tensor location seen ("cpu", "cuda:0")
  bool devices_known = false;     // false for formats that do not record devices
  // Components that this format cannot hold by construction, with the reason
  // (e.g. rng_cpu in Lightning: "Lightning saves no RNG state").
  std::map<AuditComponent, std::string> format_gaps;
  std::vector<ReaderFinding> findings;
  // What the format records of the run's configuration and environment, as digests (ckpt diff):
  // ours: /train config_digest and env_digest; HF: training_args.bin; Lightning: hyper_parameters.
  std::optional<std::string> config_digest;
  std::optional<std::string> environment_digest;
  InspectNode contents;
  uint64_t bytes_read = 0;  // measured: what the audit read from disk
};

struct ReadOptions {
  bool deep = false;      // read tensor bytes: CRC-32, NaN/Inf, all-zero moments, hashes
  bool progress = false;  // draw a progress bar on stderr while reading bytes (--deep)
  bool inspect = true;    // build `contents`
  // Keep every model tensor's bytes in the view (TensorInfo::values): ckpt diff --deep compares
  // them. Holds the whole model in memory.
  bool tensor_values = false;
};

}  // namespace ckpt::verify
