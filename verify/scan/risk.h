// The risk of one global a pickle names, and what torch.load(weights_only=True) thinks of it.
//
// Four classes (docs/security.md):
//   safe       the reconstruction callables real checkpoints use (torch tensor/storage rebuilds,
//              OrderedDict, numpy array/dtype/scalar reconstruction, builtin containers);
//   framework  classes of the training frameworks (TrainingArguments and its enums, Lightning's
//              AttributeDict, torch optimizers and schedulers, argparse.Namespace, ...) and the
//              bound-method getattr pickle writes for them: no code execution in practice, but
//              not weights-only loadable;
//   dangerous  anything that runs code, processes, network or file access, imports or dynamic
//              attribute access (by module or name list), and ANY callable outside the safe and
//              framework lists that the pickle calls;
//   unknown    any other global that is only referenced.
// Pure functions over names; thread-safe.
#pragma once

#include <string>

#include "verify/pickle/value.h"

namespace ckpt::verify {

enum class Risk : uint8_t { kSafe, kFramework, kUnknown, kDangerous };
const char* risk_name(Risk r);

// The risk of one use of a global (its names as the pickle spells them).
Risk classify_use(const GlobalUse& use);

// True when PyTorch 2.x's weights-only unpickler allows `module.name` by default
// (torch/_weights_only_unpickler.py, _get_allowed_globals; names as spelled in the pickle).
bool weights_only_allows(const std::string& module, const std::string& name);

}  // namespace ckpt::verify
