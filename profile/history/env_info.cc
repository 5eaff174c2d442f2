#include "profile/history/env_info.h"

#include <simdjson.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <fstream>
#include <set>
#include <sstream>
#include <thread>

#include "ckpt/base/hash.h"
#include "profile/import/input_file.h"
#include "profile/import/trace_import.h"

extern char** environ;

namespace ckpt::profile {

namespace {

const char* const kPrefixes[] = {"CUDA_", "NCCL_",   "OMP_",  "MKL_", "TORCH_",  "PYTORCH_",
                                 "GLOO_", "MASTER_", "CKPT_", "KMP_", "CUBLAS_", "CUDNN_"};
const char* const kExact[] = {"WORLD_SIZE",      "RANK",      "LOCAL_RANK", "LOCAL_WORLD_SIZE",
                              "LD_LIBRARY_PATH", "LD_PRELOAD"};

bool relevant(const std::string& name) {
  for (const char* p : kPrefixes) {
    if (name.rfind(p, 0) == 0) return true;
  }
  for (const char* e : kExact) {
    if (name == e) return true;
  }
  return false;
}

std::string first_line(const char* path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

// The toolkit's version.json: {"cuda": {"version": "13.0.x"}, ...}.
std::string cuda_toolkit_version() {
  auto text = read_file_text("/usr/local/cuda/version.json");
  if (!text.is_ok()) return "";
  simdjson::dom::parser p;
  simdjson::padded_string padded(*text);
  std::string_view v;
  simdjson::dom::element root;
  if (p.parse(padded).get(root) || root["cuda"]["version"].get_string().get(v)) return "";
  return std::string(v);
}

}  // namespace

Result<EnvSnapshot> capture_env(const std::string& config_path) {
  EnvSnapshot e;
  auto& f = e.fields;
  f["ckpt.version"] = "0.1.0";
#if defined(__clang__)
  f["compiler"] = std::string("clang ") + __clang_version__;
#elif defined(__GNUC__)
  f["compiler"] = std::string("gcc ") + __VERSION__;
#endif
  f["cxx.standard"] = std::to_string(__cplusplus);
#if defined(_GLIBCXX_RELEASE)
  f["cxx.library"] = "libstdc++ " + std::to_string(_GLIBCXX_RELEASE);
#endif
  f["lib.simdjson"] = std::to_string(simdjson::SIMDJSON_VERSION_MAJOR) + "." +
                      std::to_string(simdjson::SIMDJSON_VERSION_MINOR) + "." +
                      std::to_string(simdjson::SIMDJSON_VERSION_REVISION);
  f["lib.nlohmann_json"] = std::to_string(NLOHMANN_JSON_VERSION_MAJOR) + "." +
                           std::to_string(NLOHMANN_JSON_VERSION_MINOR) + "." +
                           std::to_string(NLOHMANN_JSON_VERSION_PATCH);
  std::string cuda = cuda_toolkit_version();
  f["cuda.toolkit"] = cuda.empty() ? "absent" : cuda;
  std::string driver = first_line("/proc/driver/nvidia/version");
  f["cuda.driver"] = driver.empty() ? "absent" : driver;
  struct utsname u;
  if (uname(&u) == 0) {
    f["os.kernel"] = std::string(u.sysname) + " " + u.release;
    f["os.machine"] = u.machine;
  }
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) == 0) f["host.name"] = host;
  f["host.cpus"] = std::to_string(std::thread::hardware_concurrency());
  for (char** p = environ; p != nullptr && *p != nullptr; ++p) {
    std::string kv(*p);
    size_t eq = kv.find('=');
    if (eq == std::string::npos) continue;
    std::string name = kv.substr(0, eq);
    if (relevant(name)) f["env." + name] = kv.substr(eq + 1);
  }
  if (!config_path.empty()) {
    CKPT_ASSIGN_OR_RETURN(std::string text,
                          read_bounded_file(config_path, kMaxSnapshotBytes, /*inflate=*/false));
    f["config.path"] = config_path;
    f["config.xxh3"] = hex64(xxh3_64(text.data(), text.size()));
  }
  return e;
}

nlohmann::json env_json(const EnvSnapshot& e) { return e.fields; }

Result<EnvSnapshot> env_from_json(const nlohmann::json& j, const std::string& source) {
  if (!j.is_object()) return corrupt(source + ": expected a JSON object of strings");
  EnvSnapshot e;
  for (const auto& [k, v] : j.items()) {
    if (!v.is_string()) {
      return corrupt(source + ": key \"" + k +
                     "\" is not a string (not a `ckpt profile env "
                     "--json` document)");
    }
    e.fields[k] = v.get<std::string>();
  }
  return e;
}

std::string env_text(const EnvSnapshot& e) {
  std::ostringstream o;
  for (const auto& [k, v] : e.fields) o << k << " = " << v << "\n";
  return o.str();
}

std::vector<std::string> diff_env(const EnvSnapshot& a, const EnvSnapshot& b) {
  std::vector<std::string> out;
  std::set<std::string> keys;
  for (const auto& [k, v] : a.fields) keys.insert(k);
  for (const auto& [k, v] : b.fields) keys.insert(k);
  for (const auto& k : keys) {
    auto ia = a.fields.find(k), ib = b.fields.find(k);
    if (ia == a.fields.end()) {
      out.push_back(k + ": (absent) -> " + ib->second);
    } else if (ib == b.fields.end()) {
      out.push_back(k + ": " + ia->second + " -> (absent)");
    } else if (ia->second != ib->second) {
      out.push_back(k + ": " + ia->second + " -> " + ib->second);
    }
  }
  return out;
}

}  // namespace ckpt::profile
