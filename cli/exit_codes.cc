#include "cli/exit_codes.h"

namespace ckpt::cli {

int exit_code_for(const Status& s) {
  switch (s.code()) {
    case Code::kOk:
      return kExitOk;
    case Code::kNotFound:
    case Code::kIoError:
    case Code::kLocked:
      return kExitNoInput;
    case Code::kCorrupt:
    case Code::kUnsupported:
      return kExitDataErr;
    case Code::kInvalidArgument:
      return kExitUsage;
    case Code::kMismatch:
      return kExitFindings;
    case Code::kInternal:
      return kExitInternal;
  }
  return kExitInternal;
}

}  // namespace ckpt::cli
