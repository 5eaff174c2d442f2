// `ckpt scan` as scripts use it: the exit codes (0 / 2 / 64 / 65 / 66) and one JSON object on
// stdout, run through the real executable.
#include <catch2/catch.hpp>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "tests/common/run_cli.h"

namespace fs = std::filesystem;

namespace {

const fs::path kFixtures = fs::path(CKPT_SOURCE_DIR) / "fixtures";

using ckpt_test::Run;

// `ckpt scan ARGS` (already quoted): stdout and the exit code.
Run scan(const std::string& args) { return ckpt_test::run_ckpt("scan " + args); }

std::string q(const fs::path& p) { return "'" + p.string() + "'"; }

}  // namespace

TEST_CASE("ckpt scan exit codes", "[cli]") {
  REQUIRE(fs::exists(ckpt_test::kCkptBinary));
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
