#include "cli/hf_training_args.h"

#include "ckpt/io/env.h"
#include "verify/formats/torch_file.h"

namespace ckpt::cli {
namespace {

std::optional<int64_t> int_of(const verify::Value* state, const char* key) {
  const verify::Value* v = state->get(key);
  if (v == nullptr || v->is(verify::Kind::kBool)) return std::nullopt;
  return v->as_int();
}

std::optional<bool> bool_of(const verify::Value* state, const char* key) {
  const verify::Value* v = state->get(key);
  if (v == nullptr || !v->is(verify::Kind::kBool)) return std::nullopt;
  return v->b;
}

}  // namespace

Result<analytics::HfTrainingArgs> read_hf_training_args(Env* env, const std::string& path) {
  CKPT_ASSIGN_OR_RETURN(auto file, env->open_random(path));
  CKPT_ASSIGN_OR_RETURN(verify::TorchFile tf, verify::open_torch_file(std::move(file)));
  const verify::Value* root = tf.doc ? tf.doc->root : nullptr;
  const verify::Value* state = nullptr;
  if (root != nullptr && root->is(verify::Kind::kObject)) state = root->state;
  if (root != nullptr && root->is(verify::Kind::kDict)) state = root;
  if (state == nullptr || !state->is(verify::Kind::kDict)) {
    return corrupt(path + ": not a pickled TrainingArguments (no state dict)");
  }
  analytics::HfTrainingArgs a;
  a.per_device_train_batch_size = int_of(state, "per_device_train_batch_size");
  a.gradient_accumulation_steps = int_of(state, "gradient_accumulation_steps");
  a.seed = int_of(state, "seed");
  a.data_seed = int_of(state, "data_seed");
  a.dataloader_drop_last = bool_of(state, "dataloader_drop_last");
  a.ignore_data_skip = bool_of(state, "ignore_data_skip");
  return a;
}

}  // namespace ckpt::cli
