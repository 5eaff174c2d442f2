// Running the real `ckpt` executable from the CLI and fixture tests: stdout through popen, stderr
// through a temp file, the exit code; and copies of fixture folders in a temp folder, removed
// afterwards.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

namespace ckpt_test {

namespace fs = std::filesystem;

inline const fs::path kCkptBinary = fs::path(CKPT_BINARY_DIR) / "cli" / "ckpt";

// Single-quotes a word for /bin/sh.
inline std::string quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += (c == '\'') ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

struct Run {
  int exit_code = -1;
  std::string out, err;
};

// `ckpt ARGS` (already quoted).
inline Run run_ckpt(const std::string& args) {
  const fs::path err_file =
      fs::temp_directory_path() / ("ckpt_run_cli_" + std::to_string(::getpid()) + ".err");
  const std::string cmd =
      quote(kCkptBinary.string()) + " " + args + " 2>" + quote(err_file.string());
  Run r;
  FILE* pipe = ::popen(cmd.c_str(), "r");
  REQUIRE(pipe != nullptr);
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, pipe)) > 0) r.out.append(buf, n);
  const int status = ::pclose(pipe);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  std::ifstream in(err_file);
  std::ostringstream ss;
  ss << in.rdbuf();
  r.err = ss.str();
  std::error_code ec;
  fs::remove(err_file, ec);
  return r;
}

// `ckpt ARGS` whose stdout is one JSON document (`--json`): the document, the exit code in *rc; a
// document that does not parse fails the test, with stdout and stderr in its log.
inline nlohmann::json run_ckpt_json(const std::string& args, int* rc) {
  const Run r = run_ckpt(args);
  *rc = r.exit_code;
  INFO("stdout: " << r.out << "\nstderr: " << r.err);
  nlohmann::json j = nlohmann::json::parse(r.out, nullptr, false);
  REQUIRE_FALSE(j.is_discarded());
  return j;
}

// A copy of a fixture folder in a temp folder, removed with the object.
struct FolderCopy {
  FolderCopy(const fs::path& src, const std::string& name)
      : root(fs::temp_directory_path() /
             ("ckpt_fixture_copy_" + std::to_string(::getpid()) + "_" + name)) {
    fs::remove_all(root);
    fs::create_directories(root);
    fs::copy(src, root, fs::copy_options::recursive);
  }
  ~FolderCopy() {
    std::error_code ec;
    fs::remove_all(root, ec);
  }
  FolderCopy(const FolderCopy&) = delete;
  FolderCopy& operator=(const FolderCopy&) = delete;
  fs::path root;
};

}  // namespace ckpt_test
