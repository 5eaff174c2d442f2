// Status and Result<T>: the one error currency of ckpt.
//
// Every fallible function returns `Status` (or `Result<T>`, a value or a Status). The set of codes
// is small and closed; the message says what, where, expected and actual. Exceptions from HDF5,
// libtorch and CLI11 are caught at their boundary and turned into a Status. Status is a value type;
// it is cheap to move and safe to copy. Not thread-safe to mutate concurrently, like any value.
#pragma once

#include <cassert>
#include <optional>
#include <string>
#include <utility>
#include <variant>

namespace ckpt {

enum class Code {
  kOk = 0,
  kInvalidArgument,  // the caller asked for something that cannot be done (usage error)
  kNotFound,         // a file, component or tensor that should be there is not
  kIoError,          // the OS refused: open, read, write, fsync, rename
  kCorrupt,          // bytes are there but wrong: hash mismatch, truncation, bad structure
  kMismatch,         // the checkpoint is fine but does not fit the model (shape, dtype, names)
  kUnsupported,      // a valid input we chose not to handle (legacy format, LBFGS, ...)
  kInternal,         // a bug in ckpt
  kLocked,           // another holder has the lock (RUN/LOCK of a run another process writes)
};

const char* code_name(Code c);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(Code code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status ok() { return Status(); }
  bool is_ok() const { return code_ == Code::kOk; }
  explicit operator bool() const { return is_ok(); }
  Code code() const { return code_; }
  const std::string& message() const { return message_; }
  // "corrupt: <message>", or "ok".
  std::string to_string() const;

  // Prefix the message with context, e.g. the file name: "rank-00000.h5: ...".
  Status with_context(const std::string& where) const;

 private:
  Code code_ = Code::kOk;
  std::string message_;
};

inline Status invalid_argument(std::string m) { return {Code::kInvalidArgument, std::move(m)}; }
inline Status not_found(std::string m) { return {Code::kNotFound, std::move(m)}; }
inline Status io_error(std::string m) { return {Code::kIoError, std::move(m)}; }
inline Status locked(std::string m) { return {Code::kLocked, std::move(m)}; }
inline Status corrupt(std::string m) { return {Code::kCorrupt, std::move(m)}; }
inline Status mismatch(std::string m) { return {Code::kMismatch, std::move(m)}; }
inline Status unsupported(std::string m) { return {Code::kUnsupported, std::move(m)}; }
inline Status internal_error(std::string m) { return {Code::kInternal, std::move(m)}; }

// A value or the Status that explains why there is none.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}        // NOLINT: implicit by design
  Result(Status status) : v_(std::move(status)) {  // NOLINT
    assert(!std::get<Status>(v_).is_ok() && "Result built from an ok Status");
  }

  bool is_ok() const { return std::holds_alternative<T>(v_); }
  explicit operator bool() const { return is_ok(); }
  const Status& status() const {
    static const Status kOk;
    return is_ok() ? kOk : std::get<Status>(v_);
  }
  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace ckpt

#define CKPT_CONCAT_INNER(a, b) a##b
#define CKPT_CONCAT(a, b) CKPT_CONCAT_INNER(a, b)

// Return the Status from the enclosing function if `expr` is not ok.
#define CKPT_RETURN_IF_ERROR(expr)                  \
  do {                                              \
    ::ckpt::Status ckpt_status_ = (expr);           \
    if (!ckpt_status_.is_ok()) return ckpt_status_; \
  } while (0)

// `CKPT_ASSIGN_OR_RETURN(auto x, f());` binds the value of a Result or returns its Status.
#define CKPT_ASSIGN_OR_RETURN(lhs, expr) \
  CKPT_ASSIGN_OR_RETURN_IMPL(CKPT_CONCAT(ckpt_result_, __LINE__), lhs, expr)
// `lhs` is a declaration (`auto x`), so it cannot be parenthesized; `tmp` is a name.
// NOLINTBEGIN(bugprone-macro-parentheses)
#define CKPT_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                               \
  if (!tmp.is_ok()) return tmp.status();           \
  lhs = std::move(tmp).value()
// NOLINTEND(bugprone-macro-parentheses)
