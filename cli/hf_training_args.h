// Hugging Face's training_args.bin (torch.save of a TrainingArguments) read without executing
// it: verify's non-executing unpickler builds the object's state as data, and the few fields
// coverage needs are picked from it. Lives in cli/ because it composes verify/ and analytics/.
#pragma once

#include <string>

#include "analytics/coverage/hf_run.h"
#include "ckpt/base/status.h"
#include "ckpt/io/env.h"

namespace ckpt::cli {

// On failure not_found / io_error when the file cannot be opened, corrupt when it is not a
// torch.save archive of an object with a state dict.
Result<analytics::HfTrainingArgs> read_hf_training_args(Env* env, const std::string& path);

}  // namespace ckpt::cli
