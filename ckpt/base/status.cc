#include "ckpt/base/status.h"

namespace ckpt {

const char* code_name(Code c) {
  switch (c) {
    case Code::kOk:
      return "ok";
    case Code::kInvalidArgument:
      return "invalid argument";
    case Code::kNotFound:
      return "not found";
    case Code::kIoError:
      return "I/O error";
    case Code::kLocked:
      return "locked";
    case Code::kCorrupt:
      return "corrupt";
    case Code::kMismatch:
      return "mismatch";
    case Code::kUnsupported:
      return "unsupported";
    case Code::kInternal:
      return "internal error";
  }
  return "unknown";
}

std::string Status::to_string() const {
  if (is_ok()) return "ok";
  return std::string(code_name(code_)) + ": " + message_;
}

Status Status::with_context(const std::string& where) const {
  if (is_ok()) return *this;
  return Status(code_, where + ": " + message_);
}

}  // namespace ckpt
