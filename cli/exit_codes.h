// Exit codes of the `ckpt` executable. Scripts depend on them; docs/cli.md lists them.
#pragma once

#include "ckpt/base/status.h"

namespace ckpt::cli {

constexpr int kExitOk = 0;        // complete / nothing found
constexpr int kExitInternal = 1;  // a bug in ckpt
constexpr int kExitFindings = 2;  // incomplete, inconsistent, corrupt, or discontinuities found
constexpr int kExitUsage = 64;    // bad flags or arguments (EX_USAGE)
constexpr int kExitDataErr = 65;  // unreadable, or not a checkpoint (EX_DATAERR)
constexpr int kExitNoInput = 66;  // cannot open the input (EX_NOINPUT)

// The exit code that matches a failed Status: NotFound/IoError → 66, Corrupt/Unsupported → 65,
// InvalidArgument → 64, Mismatch → 2, Internal → 1.
int exit_code_for(const Status& s);

constexpr const char* kExitCodeHelp =
    "Exit codes: 0 ok/complete; 1 internal error; 2 incomplete, inconsistent or corrupt\n"
    "(or findings, e.g. LR discontinuities); 64 usage error; 65 unreadable or not a\n"
    "checkpoint; 66 cannot open the input.";

}  // namespace ckpt::cli
