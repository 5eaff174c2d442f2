// `ckpt convert` as scripts use it, through the real executable: exit codes 0 / 2 / 64 / 65 / 66,
// one JSON object on stdout with exactly the documented keys, one line on stderr for a refusal,
// and a result that `ckpt verify` passes and `ckpt audit` reads.
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "tests/common/test_util.h"

namespace fs = std::filesystem;
using ckpt::testing::TempDir;

namespace convert_cli_test {
namespace {

const std::string kCkpt = (fs::path(CKPT_BINARY_DIR) / "cli" / "ckpt").string();
const fs::path kFixtures = fs::path(CKPT_SOURCE_DIR) / "fixtures";

std::string q(const fs::path& p) { return "'" + p.string() + "'"; }

// Runs the binary with `args` (which carry their own redirections); stdout into `out`.
int ckpt_cmd(const std::string& args, std::string* out) {
  FILE* p = ::popen(("'" + kCkpt + "' " + args).c_str(), "r");
  REQUIRE(p != nullptr);
  out->clear();
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out->append(buf, n);
  const int status = ::pclose(p);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

}  // namespace

TEST_CASE("ckpt convert --json prints the documented object", "[cli][convert]") {
  TempDir tmp;
  const std::string out_dir = tmp.path() + "/run";
  std::string out;
  REQUIRE(ckpt_cmd("convert --json " + q(kFixtures / "convert" / "values.pt") + " " + q(out_dir) +
                       " 2>/dev/null",
                   &out) == 0);
  auto j = nlohmann::json::parse(out, nullptr, false);
  REQUIRE_FALSE(j.is_discarded());
  std::set<std::string> keys;
  for (const auto& [k, v] : j.items()) keys.insert(k);
  CHECK(keys == std::set<std::string>{"input", "format", "output", "checkpoint", "step", "tensors",
                                      "bytes", "components", "mapped", "unmapped"});
  CHECK(j["format"] == "torch.save");
  CHECK(j["step"] == 3);
  CHECK(j["checkpoint"] == "step-000000000003");
  CHECK(j["tensors"].get<int>() > 20);
  CHECK(j["unmapped"].empty());
  for (const auto& m : j["mapped"]) {
    CHECK(m["path"].is_string());
    CHECK(m["to"].is_string());
    CHECK(m["as"].is_string());
  }
  CHECK(ckpt_cmd("verify " + q(out_dir) + " >/dev/null 2>&1", &out) == 0);
  CHECK(ckpt_cmd("audit --json " + q(out_dir) + " 2>/dev/null", &out) != 65);
  auto audit = nlohmann::json::parse(out, nullptr, false);
  REQUIRE_FALSE(audit.is_discarded());
  CHECK(audit["format"] == "ckpt-h5");
  CHECK(audit["components"]["optimizer"]["status"] == "present");
  CHECK(audit["components"]["scheduler"]["status"] == "present");
  CHECK(audit["components"]["rng_cpu"]["status"] == "present");
  // The fast restore pipeline loads every tensor, hashes verified.
  REQUIRE(ckpt_cmd("load-bench --json " + q(out_dir) + " 2>/dev/null", &out) == 0);
  auto bench = nlohmann::json::parse(out, nullptr, false);
  REQUIRE_FALSE(bench.is_discarded());
  CHECK(bench["bytes"] == j["bytes"]);
  CHECK(bench["verified"] == true);
}

TEST_CASE("ckpt convert exit codes", "[cli][convert]") {
  TempDir tmp;
  std::string out;
  // Something could not be mapped: 2, listed, and the checkpoint is still written.
  CHECK(ckpt_cmd("convert --json " + q(kFixtures / "convert" / "unmappable.pt") + " " +
                     q(tmp.path() + "/u") + " 2>/dev/null",
                 &out) == 2);
  auto j = nlohmann::json::parse(out, nullptr, false);
  REQUIRE_FALSE(j.is_discarded());
  CHECK(j["unmapped"].size() == 4);
  CHECK(ckpt_cmd("verify " + q(tmp.path() + "/u") + " >/dev/null 2>&1", &out) == 0);
  // OUT_DIR already holds a run: 64, one line.
  CHECK(ckpt_cmd("convert " + q(kFixtures / "convert" / "values.pt") + " " + q(tmp.path() + "/u") +
                     " 2>&1 >/dev/null",
                 &out) == 64);
  CHECK(out.find("not empty") != std::string::npos);
  CHECK(std::count(out.begin(), out.end(), '\n') == 1);
  // Damaged input: 65, one line, nothing written.
  CHECK(ckpt_cmd("convert " + q(kFixtures / "foreign" / "damaged" / "truncated.pt") + " " +
                     q(tmp.path() + "/d") + " 2>&1 >/dev/null",
                 &out) == 65);
  CHECK(std::count(out.begin(), out.end(), '\n') == 1);
  CHECK(out.find("truncated.pt") != std::string::npos);
  CHECK_FALSE(fs::exists(tmp.path() + "/d"));
  CHECK(ckpt_cmd("convert " + q(kFixtures / "foreign" / "damaged" / "random_bytes.pt") + " " +
                     q(tmp.path() + "/d") + " >/dev/null 2>&1",
                 &out) == 65);
  // The malicious pickle converts without running (its payload is listed, never called).
  ::unlink("/tmp/ckpt_audit_malicious_marker");
  CHECK(ckpt_cmd("convert --json " + q(kFixtures / "foreign" / "torch" / "malicious.pt") + " " +
                     q(tmp.path() + "/m") + " 2>/dev/null",
                 &out) == 2);
  CHECK(out.find("posix.system") != std::string::npos);
  CHECK_FALSE(fs::exists("/tmp/ckpt_audit_malicious_marker"));
  // Cannot open: 66. Usage: 64.
  CHECK(ckpt_cmd("convert /nonexistent/in.pt " + q(tmp.path() + "/n") + " >/dev/null 2>&1", &out) ==
        66);
  CHECK(ckpt_cmd("convert " + q(kFixtures / "convert" / "values.pt") + " >/dev/null 2>&1", &out) ==
        64);
  CHECK(ckpt_cmd("convert --help 2>&1", &out) == 0);
  CHECK(out.find("Exit codes") != std::string::npos);
  CHECK(out.find("/optimizer") != std::string::npos);
}

TEST_CASE("hostile inputs never crash ckpt convert and never run", "[cli][convert]") {
  // The scan exploit corpus, the malicious pickles and zips (bombs, cycles, absurd sizes, tensors
  // past their storage) and the fuzz seeds: each is refused with one line (65) or converted with
  // its payload listed as unmapped (2). Nothing they would run may have run.
  const std::vector<std::string> markers = {"/tmp/ckpt-scan-marker-must-not-exist",
                                            "/tmp/ckpt_verify_malicious_marker",
                                            "/tmp/ckpt_audit_malicious_marker"};
  for (const auto& m : markers) ::unlink(m.c_str());
  size_t files = 0, converted = 0;
  for (const char* dir : {"scan/exploits", "malicious", "fuzz_seeds"}) {
    for (const auto& e : fs::recursive_directory_iterator(kFixtures / dir)) {
      const std::string ext = e.path().extension().string();
      if (!e.is_regular_file() || ext == ".py" || ext == ".md") continue;
      TempDir tmp;
      std::string err;
      const int rc = ckpt_cmd(
          "convert " + q(e.path()) + " " + q(tmp.path() + "/run") + " 2>&1 >/dev/null", &err);
      INFO(e.path().string() << ": exit " << rc << ": " << err);
      CHECK((rc == 65 || rc == 2));
      if (rc == 65) {
        CHECK(std::count(err.begin(), err.end(), '\n') == 1);
        CHECK_FALSE(fs::exists(tmp.path() + "/run"));
      } else {
        ++converted;
        CHECK(ckpt_cmd("verify " + q(tmp.path() + "/run") + " >/dev/null 2>&1", &err) == 0);
      }
      ++files;
    }
  }
  CHECK(files >= 50);
  CHECK(converted >= 1);
  for (const auto& m : markers) CHECK_FALSE(fs::exists(m));
}

TEST_CASE("h5py reads what torch.load reads from the source", "[cli][convert]") {
  // Two independent readers on the two ends: Debian's torch.load of our own fixture, h5py of the
  // converted rank file (tests/convert/compare_with_torch.py).
  TempDir tmp;
  const fs::path in = kFixtures / "convert" / "values.pt";
  std::string out;
  REQUIRE(ckpt_cmd("convert " + q(in) + " " + q(tmp.path() + "/run") + " >/dev/null 2>&1", &out) ==
          0);
  const fs::path script = fs::path(CKPT_SOURCE_DIR) / "tests" / "convert" / "compare_with_torch.py";
  const std::string cmd = "/usr/bin/python3 " + q(script) + " " + q(in) + " " +
                          q(tmp.path() + "/run/step-000000000003/rank-00000.h5") + " 2>&1";
  FILE* p = ::popen(cmd.c_str(), "r");
  REQUIRE(p != nullptr);
  char buf[4096];
  size_t n;
  out.clear();
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  const int status = ::pclose(p);
  INFO(out);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  CHECK(out.rfind("ok ", 0) == 0);
}

}  // namespace convert_cli_test
