// Issue 24's count: across every real fixture under fixtures/foreign/ (every case of every
// EXPECTED.json), the checkpoints that resume correctly are audited through the `ckpt`
// executable and the exit-2 verdicts among them are counted and printed; the count must be 0.
// A case resumes correctly when it says so ("resumes_correctly": true), or, without that field,
// when its expected exit code is 0. Cases that say "resumes_correctly": false are real gaps
// (a missing RNG, a replayed epoch) and are not counted.
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "tests/common/run_cli.h"

namespace false_alarm_test {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const fs::path kFixtures = fs::path(CKPT_SOURCE_DIR) / "fixtures" / "foreign";

json read_json(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return json::parse(ss.str());
}

TEST_CASE("no exit-2 verdict on a real fixture that resumes correctly", "[verify]") {
  std::vector<json> cases;
  const json top = read_json(kFixtures / "EXPECTED.json");
  for (const auto& c : top.at("cases")) cases.push_back(c);
  for (const auto& e : fs::directory_iterator(kFixtures)) {
    const fs::path sub = e.path() / "EXPECTED.json";
    if (!e.is_directory() || !fs::exists(sub)) continue;
    const json more = read_json(sub);
    for (const auto& c : more.at("cases")) cases.push_back(c);
  }
  size_t correct = 0, false_alarms = 0, explicit_flag = 0;
  std::string which;
  for (const auto& c : cases) {
    const bool flagged = c.contains("resumes_correctly");
    const bool resumes =
        flagged ? c["resumes_correctly"].get<bool>() : c.at("exit").get<int>() == 0;
    if (!resumes) continue;
    ++correct;
    explicit_flag += flagged ? 1 : 0;
    std::string cmd = "audit --json";
    for (const auto& a : c.value("args", json::array()))
      cmd += " " + ckpt_test::quote(a.get<std::string>());
    const auto r = ckpt_test::run_ckpt(
        cmd + " " + ckpt_test::quote((kFixtures / c.at("path").get<std::string>()).string()));
    if (r.exit_code == 2) {
      ++false_alarms;
      which += " " + c.at("path").get<std::string>();
    }
  }
  std::cout << "audit false alarms: " << false_alarms << " exit-2 verdicts on " << correct
            << " real fixtures that resume correctly (" << explicit_flag
            << " marked resumes_correctly, the rest expected to exit 0; " << cases.size()
            << " cases in all)" << (which.empty() ? "" : ":" + which) << "\n";
  CHECK(correct >= 40);
  CHECK(false_alarms == 0);
}

}  // namespace

}  // namespace false_alarm_test
