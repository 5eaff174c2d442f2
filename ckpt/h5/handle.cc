#include "ckpt/h5/handle.h"

namespace ckpt::h5 {
namespace {

herr_t collect(unsigned n, const H5E_error2_t* err, void* data) {
  auto* out = static_cast<std::string*>(data);
  if (n > 3) return 0;  // the innermost few frames say what went wrong
  if (!out->empty()) out->append("; ");
  out->append(err->func_name ? err->func_name : "?");
  out->append(": ");
  out->append(err->desc ? err->desc : "");
  return 0;
}

}  // namespace

void quiet_errors() {
  static std::once_flag once;
  std::call_once(once, [] {
    // Before anything initialises the library: no atexit cleanup, which would dereference a
    // file whose close failed half way (disk full) — see rank_file_write.cc. Every file ckpt
    // opens is closed by its Handle, so the cleanup has nothing else to do.
    H5dont_atexit();
  });
  // Per thread: a thread-safe HDF5 keeps one error stack (and its auto-print) per thread, and
  // a non-blocking save writes from a background thread.
  thread_local bool quiet = false;
  if (!quiet) {
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
    quiet = true;
  }
}

std::string error_stack() {
  std::string out;
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_DOWNWARD, collect, &out);
  H5Eclear2(H5E_DEFAULT);
  return out;
}

Status h5_error(const std::string& where, const std::string& what, Code code) {
  std::string stack = error_stack();
  std::string msg = where + ": " + what;
  if (!stack.empty()) msg += " (HDF5: " + stack + ")";
  return Status(code, msg);
}

std::mutex& h5_lock() {
  static std::mutex m;
  return m;
}

}  // namespace ckpt::h5
