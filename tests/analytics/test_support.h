// Helpers shared by the analytics tests: fixture paths and scratch directories. Not thread-safe
// (tests run one at a time).
#pragma once

#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>

namespace ckpt::analytics::testing {

inline std::string fixture(const std::string& name) {
  return std::string(CKPT_SOURCE_DIR) + "/fixtures/analytics/" + name;
}

// A fresh directory under $TMPDIR (or /tmp), removed by the caller's scope guard.
class ScratchDir {
 public:
  ScratchDir() {
    const char* base = std::getenv("TMPDIR");
    std::string templ = std::string(base ? base : "/tmp") + "/ckpt-analytics-XXXXXX";
    path_ = ::mkdtemp(templ.data()) ? templ : std::string();
  }
  ~ScratchDir() {
    if (!path_.empty()) std::system(("rm -rf '" + path_ + "'").c_str());
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  const std::string& path() const { return path_; }
  std::string file(const std::string& name, const std::string& text) const {
    const std::string p = path_ + "/" + name;
    std::ofstream(p, std::ios::binary) << text;
    return p;
  }

 private:
  std::string path_;
};

}  // namespace ckpt::analytics::testing
