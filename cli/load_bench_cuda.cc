#include "cli/load_bench_cuda.h"

#include <dlfcn.h>
#include <unistd.h>

#include <mutex>
#include <vector>

namespace ckpt::cli {
namespace {

std::string executable_dir() {
  std::vector<char> buf(4096);
  const ssize_t n = ::readlink("/proc/self/exe", buf.data(), buf.size() - 1);
  if (n <= 0) return ".";
  std::string exe(buf.data(), static_cast<size_t>(n));
  const size_t slash = exe.find_last_of('/');
  return slash == std::string::npos ? "." : exe.substr(0, slash);
}

// The module's entry point, or why there is none. Opened once; never closed (the process ends).
Result<LoadAllDeviceFn> entry_point() {
  static std::once_flag once;
  static Result<LoadAllDeviceFn> found = LoadAllDeviceFn{nullptr};
  std::call_once(once, [] {
    const std::string dir = executable_dir();
    std::string why;
    for (const std::string& path :
         {dir + "/" + kLoadBenchCudaModule, dir + "/../lib/ckpt/" + kLoadBenchCudaModule}) {
      if (::access(path.c_str(), F_OK) != 0) continue;
      void* h = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
      if (h == nullptr) {
        const char* e = ::dlerror();
        found = unsupported(
            path + ": cannot load the CUDA restore path: " + (e != nullptr ? e : "dlopen failed"));
        return;
      }
      void* sym = ::dlsym(h, kLoadAllDeviceSymbol);
      if (sym == nullptr) {
        found = unsupported(path + ": not ckpt's CUDA restore module (no " +
                            std::string(kLoadAllDeviceSymbol) + ")");
        return;
      }
      found = reinterpret_cast<LoadAllDeviceFn>(sym);
      return;
    }
    found =
        unsupported("this ckpt was built without the CUDA restore path (no CUDA toolkit found)");
  });
  return found;
}

}  // namespace

Result<resume::LoadAllStats> load_all_device_lazily(Env* env, const std::string& step_dir,
                                                    int device,
                                                    const resume::LoadAllOptions& options) {
  auto fn = entry_point();
  if (!fn.is_ok())
    return unsupported("cuda:" + std::to_string(device) + ": " + fn.status().message());
  Result<resume::LoadAllStats> out = internal_error("the CUDA restore module returned nothing");
  (*fn)(env, step_dir, device, options, &out);
  return out;
}

}  // namespace ckpt::cli
