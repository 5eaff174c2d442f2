// LoRA / PEFT adapters as the model state of a run. A Trainer (or save_pretrained) on a
// `peft.get_peft_model(...)` model writes adapter_model.safetensors (or adapter_model.bin) and
// adapter_config.json instead of model.safetensors; torchtune's LoRA recipes write
// epoch_N/adapter_model.pt (+ a PEFT copy) and a short adapter_config.json. Either way the
// checkpoint holds only the trained adapter: the frozen base weights are loaded again from
// elsewhere (PEFT: adapter_config.json's base_model_name_or_path; torchtune: the config's
// checkpointer.checkpoint_dir), which the audit names and, for a local path, checks exists.
//
// note_peft_adapter() is called by the HF folder reader after it has read every file of `dir`
// (`names`: its entries): it describes the adapter in the model evidence (PEFT type, r, target
// modules, tensor count, the base), checks each LoRA pair against r, reports an
// adapter_config.json whose weights file is gone (error) and a local base path that does not
// exist here (warning), and notes an optimizer that holds exactly the adapter's tensors (PEFT
// freezes the base: that is the whole trainable set). It reads only adapter_config.json; corrupt
// when that is not a JSON object. The other functions are its steps, shared with the torchtune
// reader. Pure apart from that file and Env::exists; thread-safe on distinct views.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ckpt/base/status.h"
#include "ckpt/io/env.h"
#include "verify/formats/view.h"

namespace ckpt::verify {

// The fields of adapter_config.json the audit names: PEFT's PeftConfig.to_dict(), or the subset
// torchtune writes (r, lora_alpha, target_modules, peft_type).
struct AdapterConfig {
  std::string peft_type;  // "LORA", "IA3", ...
  std::optional<int64_t> r;
  std::optional<double> alpha;
  std::string targets;        // "c_proj, c_attn", or the regex PEFT also accepts
  std::string base;           // base_model_name_or_path; empty when absent or null
  bool rank_pattern = false;  // per-module ranks: r is then only the default
};

Result<AdapterConfig> read_adapter_config(Env* env, const std::string& path);

// "a PEFT LORA adapter (adapter_config.json: r 4, lora_alpha 8, target_modules c_proj, c_attn)".
std::string describe_adapter(const AdapterConfig& c, const std::string& config_label);

// LoRA: every module needs lora_A [r, in, ...] and lora_B [out, r, ...] (torchtune: lora_a /
// lora_b). A lone half, or a rank other than r, is an inconsistent-model error finding. Returns
// the number of complete pairs.
size_t check_lora_pairs(const std::vector<const TensorInfo*>& adapter, const AdapterConfig& c,
                        const std::string& file, CheckpointView* view);

// Where the frozen base weights come from (`base`, as `said_by` names it): the evidence text, and
// a warning finding when `base` is empty or a local path that does not exist here.
std::string note_base_model(Env* env, const std::string& base, const std::string& said_by,
                            CheckpointView* view);

Status note_peft_adapter(Env* env, const std::string& dir, const std::vector<std::string>& names,
                         CheckpointView* view);

}  // namespace ckpt::verify
