// `ckpt scan` as scripts use it: the exit codes (0 / 2 / 64 / 65 / 66) and one JSON object on
// stdout, run through the real executable.
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

namespace fs = std::filesystem;

namespace {

const fs::path kCkpt = fs::path(CKPT_BINARY_DIR) / "cli" / "ckpt";
const fs::path kFixtures = fs::path(CKPT_SOURCE_DIR) / "fixtures";

struct Run {
  int exit_code = -1;
  std::string out;
};

Run scan(const std::string& args) {
  const std::string cmd = "'" + kCkpt.string() + "' scan " + args + " 2>/dev/null";
  Run r;
  FILE* pipe = ::popen(cmd.c_str(), "r");
  REQUIRE(pipe != nullptr);
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, pipe)) > 0) r.out.append(buf, n);
  const int status = ::pclose(pipe);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return r;
}

std::string q(const fs::path& p) { return "'" + p.string() + "'"; }

}  // namespace

TEST_CASE("ckpt scan exit codes", "[cli]") {
  REQUIRE(fs::exists(kCkpt));
  CHECK(scan(q(kFixtures / "scan" / "exploits" / "torch_zip_payload.pt")).exit_code == 2);
  CHECK(scan(q(kFixtures / "foreign" / "torch" / "complete.pt")).exit_code == 0);
  CHECK(scan(q(kFixtures / "foreign" / "hf" / "checkpoint-6")).exit_code == 0);
  CHECK(scan(q(kFixtures / "foreign" / "safetensors" / "mlp.safetensors")).exit_code == 0);
  CHECK(scan(q(kFixtures / "foreign" / "damaged" / "not_a_checkpoint.txt")).exit_code == 65);
  CHECK(scan("/nonexistent/ckpt-scan-input").exit_code == 66);
  CHECK(scan("").exit_code == 64);
  CHECK(scan("--no-such-flag x").exit_code == 64);
}

TEST_CASE("ckpt scan --json prints one object", "[cli]") {
  Run r = scan("--json " + q(kFixtures / "scan" / "exploits" / "numpy_object_payload.npy"));
  CHECK(r.exit_code == 2);
  auto j = nlohmann::json::parse(r.out, nullptr, false);
  REQUIRE_FALSE(j.is_discarded());
  CHECK(j["format"] == "numpy .npy");
  CHECK(j["safe"] == false);
  bool system = false;
  for (const auto& g : j["globals"]) system = system || (g["name"] == "system" && g["called"]);
  CHECK(system);

  Run t = scan(q(kFixtures / "scan" / "exploits" / "torch_zip_payload.pt"));
  CHECK(t.out.rfind("UNSAFE", 0) == 0);
  CHECK(t.out.find("dangerous  posix.system  called") != std::string::npos);
}
