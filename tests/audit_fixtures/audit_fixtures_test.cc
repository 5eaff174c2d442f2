// Fixture-level tests of `ckpt audit`: every case of fixtures/foreign/EXPECTED.json is run through
// the real `ckpt` executable (`ckpt audit --json [args] PATH`), and its exit code, the exact status
// of every component, the shape of the JSON report and the required findings are asserted. The
// fixtures were written by the real libraries (torch.save, HF Trainer, Accelerate, Lightning, DCP);
// see fixtures/foreign/README.md. The malicious fixture must be reported and never executed: the
// marker file its pickle would create must not appear.
#include <sys/wait.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "tests/common/run_cli.h"

namespace audit_fixtures_test {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const fs::path kFixtures = fs::path(CKPT_SOURCE_DIR) / "fixtures" / "foreign";
const fs::path kCkpt = fs::path(CKPT_BINARY_DIR) / "cli" / "ckpt";

const std::set<std::string> kStatuses = {"present",        "missing", "empty",  "inconsistent",
                                         "not_applicable", "derived", "unknown"};
const std::set<std::string> kSeverities = {"error", "warning", "info"};

using RunResult = ckpt_test::Run;  // out: stdout (the JSON report), err: stderr (diagnostics)

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

std::string shell_quote(const std::string& s) { return ckpt_test::quote(s); }

std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Runs `ckpt audit --json ARGS PATH`.
RunResult run_audit(const std::vector<std::string>& args, const fs::path& path) {
  std::string cmd = "audit --json";
  for (const auto& a : args) cmd += " " + shell_quote(a);
  return ckpt_test::run_ckpt(cmd + " " + shell_quote(path.string()));
}

// fixtures/foreign/EXPECTED.json, plus the cases of every fixtures/foreign/<dir>/EXPECTED.json
// (a format's own folder: megatron/), whose paths are relative to fixtures/foreign too.
json load_expected() {
  const fs::path p = kFixtures / "EXPECTED.json";
  REQUIRE(fs::exists(p));
  json all = json::parse(read_file(p));
  for (const auto& e : fs::directory_iterator(kFixtures)) {
    const fs::path sub = e.path() / "EXPECTED.json";
    if (!e.is_directory() || !fs::exists(sub)) continue;
    const json more = json::parse(read_file(sub));
    for (const auto& c : more.at("cases")) all["cases"].push_back(c);
  }
  return all;
}

// The report object has exactly the documented keys with the documented types.
void check_report_shape(const json& j) {
  REQUIRE(j.is_object());
  std::set<std::string> keys;
  for (auto it = j.begin(); it != j.end(); ++it) keys.insert(it.key());
  CHECK(keys == std::set<std::string>{"path", "format", "complete", "components", "findings"});
  CHECK(j.value("path", json()).is_string());
  CHECK(j.value("format", json()).is_string());
  CHECK(j.value("complete", json()).is_boolean());
  REQUIRE(j.value("components", json()).is_object());
  for (auto it = j["components"].begin(); it != j["components"].end(); ++it) {
    INFO("component " << it.key());
    REQUIRE(it.value().is_object());
    REQUIRE(it.value().contains("status"));
    REQUIRE(it.value()["status"].is_string());
    CHECK(kStatuses.count(it.value()["status"].get<std::string>()) == 1);
    CHECK(it.value().contains("evidence"));
  }
  REQUIRE(j.value("findings", json()).is_array());
  for (const auto& f : j["findings"]) {
    REQUIRE(f.is_object());
    REQUIRE(f.contains("severity"));
    REQUIRE(f["severity"].is_string());
    CHECK(kSeverities.count(f["severity"].get<std::string>()) == 1);
    CHECK((f.contains("component") && (f["component"].is_string() || f["component"].is_null())));
    REQUIRE(f.contains("message"));
    CHECK(f["message"].is_string());
  }
}

bool finding_matches(const json& finding, const json& want) {
  if (finding.value("severity", "") != want.value("severity", "")) return false;
  if (want.contains("component") &&
      !(finding.contains("component") && finding["component"] == want["component"]))
    return false;
  const std::string msg = lower(finding.value("message", ""));
  for (const auto& word : want.value("all_of", json::array()))
    if (msg.find(lower(word.get<std::string>())) == std::string::npos) return false;
  return true;
}

void check_case(const json& c) {
  const std::string rel = c.at("path").get<std::string>();
  std::vector<std::string> args;
  for (const auto& a : c.value("args", json::array())) args.push_back(a.get<std::string>());
  const int want_exit = c.at("exit").get<int>();

  std::string marker;
  if (c.contains("marker")) {
    marker = c["marker"].get<std::string>();
    std::error_code ec;
    fs::remove(marker, ec);
  }

  const RunResult r = run_audit(args, kFixtures / rel);
  INFO("stdout: " << r.out);
  INFO("stderr: " << r.err);
  CHECK(r.exit_code == want_exit);

  for (const auto& s : c.value("output_contains", json::array()))
    CHECK(lower(r.out + r.err).find(lower(s.get<std::string>())) != std::string::npos);

  if (!marker.empty()) CHECK_FALSE(fs::exists(marker));

  if (c.at("components").is_null()) {
    // Unreadable / cannot open: a report on stdout is optional, but if there is one it has the
    // documented shape.
    if (r.out.find_first_not_of(" \t\r\n") != std::string::npos) {
      const json j = json::parse(r.out, nullptr, /*allow_exceptions=*/false);
      REQUIRE_FALSE(j.is_discarded());
      check_report_shape(j);
    }
    return;
  }

  const json j = json::parse(r.out, nullptr, /*allow_exceptions=*/false);
  REQUIRE_FALSE(j.is_discarded());
  check_report_shape(j);
  CHECK(j["complete"].get<bool>() == (want_exit == 0));

  const json& want = c["components"];
  const json& got = j["components"];
  for (auto it = want.begin(); it != want.end(); ++it) {
    INFO("component " << it.key() << " (" << it.value().value("why", "") << ")");
    REQUIRE(got.contains(it.key()));
    CHECK(got[it.key()]["status"] == it.value()["status"]);
    const std::string evidence = lower(got[it.key()].value("evidence", ""));
    for (const auto& s : it.value().value("evidence_contains", json::array())) {
      INFO("evidence: " << evidence << "\nmust contain: " << s.get<std::string>());
      CHECK(evidence.find(lower(s.get<std::string>())) != std::string::npos);
    }
  }
  for (auto it = got.begin(); it != got.end(); ++it) {
    if (want.contains(it.key())) continue;
    // Only components the fixture cannot have may be reported beyond the expected ones.
    INFO("unexpected component " << it.key());
    CHECK(it.value()["status"] == "not_applicable");
  }

  for (const auto& f : c.value("findings_contain", json::array())) {
    INFO("wanted finding " << f.dump());
    bool found = false;
    for (const auto& g : j["findings"]) found = found || finding_matches(g, f);
    CHECK(found);
  }
}

std::string case_name(const json& c) {
  std::string name = c.at("path").get<std::string>();
  for (const auto& a : c.value("args", json::array())) name += " " + a.get<std::string>();
  return name;
}

TEST_CASE("ckpt audit reports every foreign fixture exactly as EXPECTED.json says", "[verify]") {
  const json expected = load_expected();
  REQUIRE(fs::exists(kCkpt));
  const json& cases = expected.at("cases");
  REQUIRE(cases.size() > 0);
  for (const auto& c : cases) {
    DYNAMIC_SECTION(case_name(c)) { check_case(c); }
  }
}

TEST_CASE("the malicious pickle is reported and never executed", "[verify]") {
  const fs::path path = kFixtures / "torch" / "malicious.pt";
  const std::string marker = "/tmp/ckpt_audit_malicious_marker";
  REQUIRE(fs::exists(path));
  REQUIRE(fs::exists(kCkpt));
  // The fixture is armed: its pickle names posix.system and the marker path.
  const std::string raw = read_file(path);
  REQUIRE(raw.find("posix\nsystem\n") != std::string::npos);
  REQUIRE(raw.find(marker) != std::string::npos);

  std::error_code ec;
  fs::remove(marker, ec);
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{}, std::vector<std::string>{"--deep"}}) {
    const RunResult r = run_audit(args, path);
    INFO("stdout: " << r.out << "\nstderr: " << r.err);
    CHECK_FALSE(fs::exists(marker));
    CHECK(r.exit_code == 2);
    const json j = json::parse(r.out, nullptr, false);
    REQUIRE_FALSE(j.is_discarded());
    check_report_shape(j);
    bool reported = false;
    for (const auto& f : j["findings"])
      reported =
          reported || finding_matches(f, {{"severity", "error"}, {"all_of", {"posix", "system"}}});
    CHECK(reported);
  }
}

// Runs `ckpt ARGS` (a whole command line); stdout, stderr and the exit code.
RunResult run_ckpt(const std::string& args) { return ckpt_test::run_ckpt(args); }

TEST_CASE("invalid UTF-8 in pickle keys and file names never breaks --json", "[verify]") {
  const fs::path src = kFixtures / "real" / "bad_utf8.pt";
  REQUIRE(fs::exists(src));
  // The fixture really holds the bytes: torch.save wrote the lone surrogate as ED B3 BF.
  REQUIRE(read_file(src).find("caf\xed\xb3\xbf") != std::string::npos);
  const fs::path dir =
      fs::temp_directory_path() / ("ckpt_audit_utf8_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const fs::path odd = dir / "run\xff\xfe.pt";  // a file name that is not UTF-8
  fs::copy_file(src, odd, fs::copy_options::overwrite_existing);
  for (const fs::path& p : {src, odd}) {
    for (const std::string& cmd :
         {std::string("inspect --json "), std::string("audit --deep --json ")}) {
      INFO(cmd << p.string());
      const RunResult r = run_ckpt(cmd + shell_quote(p.string()));
      CHECK(r.exit_code == (cmd.rfind("inspect", 0) == 0 ? 0 : 2));
      const json j = json::parse(r.out, nullptr, false);
      REQUIRE_FALSE(j.is_discarded());
      // The bad bytes arrive escaped as the text \xNN (JSON: "\\xNN"), never raw.
      CHECK(r.out.find("\\\\x") != std::string::npos);
      CHECK(r.out.find('\xff') == std::string::npos);
    }
  }
  std::error_code ec;
  fs::remove_all(dir, ec);
}

json diff_json(const fs::path& a, const fs::path& b, int* exit_code,
               const std::string& flags = "") {
  const RunResult r = run_ckpt("diff --json " + flags + " " + shell_quote(a.string()) + " " +
                               shell_quote(b.string()));
  *exit_code = r.exit_code;
  INFO("stdout: " << r.out);
  json j = json::parse(r.out, nullptr, false);
  REQUIRE_FALSE(j.is_discarded());
  std::set<std::string> keys;
  for (auto it = j.begin(); it != j.end(); ++it) keys.insert(it.key());
  CHECK(keys == std::set<std::string>{"a", "b", "differences", "components", "counters", "lr",
                                      "hyperparameters", "tensors", "digests", "notes"});
  CHECK(j["tensors"].contains("only_a"));
  CHECK(j["tensors"].contains("only_b"));
  CHECK(j["tensors"].contains("changed"));
  CHECK(j["digests"]["config"].contains("a"));
  CHECK(j["digests"]["environment"].contains("b"));
  CHECK(j["components"].size() == 8);
  return j;
}

TEST_CASE("ckpt diff compares two checkpoints of any format", "[verify]") {
  int rc = -1;
  SECTION("a checkpoint against itself: no difference, exit 0") {
    json j = diff_json(kFixtures / "real" / "gan.pt", kFixtures / "real" / "gan.pt", &rc);
    CHECK(rc == 0);
    CHECK(j["differences"] == 0);
    CHECK(j["counters"]["a"]["global_step"] == 4);
    CHECK(j["lr"]["a"] == j["lr"]["b"]);
    CHECK(j["lr"]["a"].size() == 2);  // both optimizers' groups
  }
  SECTION("a re-created optimizer: the status, the counters and the LR differ, exit 2") {
    json j = diff_json(kFixtures / "torch" / "complete.pt",
                       kFixtures / "torch" / "inconsistent_optimizer.pt", &rc);
    CHECK(rc == 2);
    CHECK(j["components"]["optimizer"]["a"] == "present");
    CHECK(j["components"]["optimizer"]["b"] == "inconsistent");
    CHECK(j["counters"]["a"]["global_step"] == 6);
    CHECK(j["counters"]["b"]["global_step"] == 9);
    CHECK(j["lr"]["a"] != j["lr"]["b"]);
    bool kind = false;
    for (const auto& h : j["hyperparameters"])
      kind = kind ||
             (h["key"] == "scheduler.kind" && h["a"] == "CosineAnnealingLR" && h["b"] == "StepLR");
    CHECK(kind);
    CHECK(j["differences"].get<int>() >= 7);
  }
  SECTION("a shard lost in a copy: its tensors are only in A") {
    json j = diff_json(kFixtures / "real" / "sharded", kFixtures / "real" / "sharded_missing", &rc);
    CHECK(rc == 2);
    CHECK(j["tensors"]["only_a"].size() == 6);
    CHECK(j["tensors"]["only_b"].empty());
    CHECK(j["tensors"]["only_a"][0] == "transformer.h.0.mlp.c_fc.bias");
    CHECK(j["components"]["model"]["b"] == "inconsistent");
  }
  SECTION("HF against Lightning: both record a config, the digests differ") {
    json j = diff_json(kFixtures / "hf" / "checkpoint-6",
                       kFixtures / "lightning" / "epoch_end.ckpt", &rc);
    CHECK(rc == 2);
    CHECK(j["digests"]["config"]["a"].is_string());
    CHECK(j["digests"]["config"]["b"].is_string());
    CHECK(j["digests"]["config"]["a"] != j["digests"]["config"]["b"]);
    CHECK(j["digests"]["environment"]["a"].is_null());
  }
  SECTION("exit codes as audit: 66 cannot open, 65 not a checkpoint") {
    CHECK(run_ckpt("diff " + shell_quote((kFixtures / "damaged" / "does_not_exist.pt").string()) +
                   " " + shell_quote((kFixtures / "real" / "gan.pt").string()))
              .exit_code == 66);
    CHECK(run_ckpt("diff " + shell_quote((kFixtures / "real" / "gan.pt").string()) + " " +
                   shell_quote((kFixtures / "damaged" / "random_bytes.pt").string()))
              .exit_code == 65);
  }
  SECTION("the text form: differences first, then the same in one line") {
    const RunResult r =
        run_ckpt("diff " + shell_quote((kFixtures / "torch" / "complete.pt").string()) + " " +
                 shell_quote((kFixtures / "torch" / "inconsistent_optimizer.pt").string()));
    CHECK(r.exit_code == 2);
    const size_t table = r.out.find("difference(s)"), same = r.out.find("\nsame: ");
    REQUIRE(table != std::string::npos);
    REQUIRE(same != std::string::npos);
    CHECK(table < same);
    CHECK(r.out.find("optimizer             present            inconsistent") != std::string::npos);
    CHECK(r.out.find("4 model tensors", same) != std::string::npos);
  }
}

TEST_CASE("ckpt diff --deep compares the model tensors' values", "[verify]") {
  int rc = -1;
  SECTION("two saves of different runs: each changed tensor with its max abs difference") {
    const fs::path a = kFixtures / "torch" / "complete.pt";
    const fs::path b = kFixtures / "torch" / "inconsistent_optimizer.pt";
    json shallow = diff_json(a, b, &rc);
    CHECK(shallow["tensors"]["changed"].empty());  // same names, dtypes and shapes
    json j = diff_json(a, b, &rc, "--deep");
    CHECK(rc == 2);
    REQUIRE(j["tensors"]["changed"].size() == 4);
    for (const auto& t : j["tensors"]["changed"]) {
      INFO(t.dump());
      CHECK(t["a"] == t["b"]);
      REQUIRE(t["max_abs_diff"].is_number());
      CHECK(t["max_abs_diff"].get<double>() > 0);
    }
    CHECK(j["differences"].get<int>() == shallow["differences"].get<int>() + 4);
  }
  SECTION("a checkpoint against itself: every tensor equal by value") {
    const fs::path a = kFixtures / "megatron" / "legacy_tp2";
    json j = diff_json(a, a, &rc, "--deep");
    CHECK(rc == 0);
    CHECK(j["differences"] == 0);
    const RunResult r =
        run_ckpt("diff --deep " + shell_quote(a.string()) + " " + shell_quote(a.string()));
    CHECK(r.out.find("17 model tensors (17 equal by value)") != std::string::npos);
  }
  SECTION("Megatron runs with the same seed and data: equal weights, other pieces saved") {
    json j = diff_json(kFixtures / "megatron" / "legacy_noopt",
                       kFixtures / "megatron" / "legacy_norng", &rc, "--deep");
    CHECK(rc == 2);
    CHECK(j["tensors"]["changed"].empty());
    CHECK(j["components"]["optimizer"]["a"] == "missing");
    CHECK(j["components"]["rng_cpu"]["b"] == "missing");
  }
}

TEST_CASE("every fixture file is covered by a case of EXPECTED.json", "[verify]") {
  const json expected = load_expected();
  std::vector<fs::path> covered;
  for (const auto& c : expected.at("cases"))
    covered.push_back(kFixtures / c.at("path").get<std::string>());
  const std::set<std::string> not_fixtures = {"README.md", "EXPECTED.json", "versions.json",
                                              "torch_facts.json", "lib_facts.json"};
  for (const auto& e : fs::recursive_directory_iterator(kFixtures)) {
    if (!e.is_regular_file()) continue;
    const fs::path p = e.path();
    // Notes and generators beside the fixtures, at the top or in a format's own folder.
    const bool beside = p.parent_path() == kFixtures || p.parent_path().parent_path() == kFixtures;
    if (beside && (not_fixtures.count(p.filename().string()) || p.extension() == ".py" ||
                   p.extension() == ".sh" || p.filename() == "VERSIONS"))
      continue;
    bool ok = false;
    for (const auto& c : covered) {
      // A case covers its own file or, for a checkpoint folder, everything under it.
      auto rel = p.lexically_relative(c);
      ok = ok || p == c || (!rel.empty() && *rel.begin() != "..");
    }
    INFO("fixture without a case: " << p.lexically_relative(kFixtures).string());
    CHECK(ok);
  }
}

TEST_CASE("a Trainer checkpoint without trainer_state.json names it, and is still the Trainer's",
          "[verify]") {
  ckpt_test::FolderCopy copy(kFixtures / "hf" / "checkpoint-6", "no_trainer_state");
  fs::remove(copy.root / "trainer_state.json");
  const RunResult r = run_audit({}, copy.root);
  CHECK(r.exit_code == 2);
  const json j = json::parse(r.out, nullptr, false);
  REQUIRE_FALSE(j.is_discarded());
  CHECK(j["format"] == "hf-trainer");  // its rng_state.pth says so, not accelerate
  CHECK(j["components"]["counters"]["status"] == "missing");
  CHECK(j["components"]["counters"]["evidence"].get<std::string>().find(
            "trainer_state.json is missing from this Trainer checkpoint") != std::string::npos);
  bool named = false;
  for (const auto& f : j["findings"]) {
    named = named || f["message"].get<std::string>().find(
                         "trainer_state.json is missing (the "
                         "Trainer writes it") != std::string::npos;
  }
  CHECK(named);
}

TEST_CASE(
    "a counter from another save beside an optimizer and scheduler that agree is the one "
    "blamed",
    "[verify]") {
  // trainer_state.json copied from an older checkpoint: global_step 3, while optimizer.pt and
  // scheduler.pt both stand at 6. The two that agree are fine; the counter is from another save.
  ckpt_test::FolderCopy copy(kFixtures / "hf" / "checkpoint-6", "stale_trainer_state");
  json state = json::parse(read_file(copy.root / "trainer_state.json"));
  state["global_step"] = 3;
  std::ofstream(copy.root / "trainer_state.json") << state.dump();
  const RunResult r = run_audit({}, copy.root);
  CHECK(r.exit_code == 2);
  const json j = json::parse(r.out, nullptr, false);
  REQUIRE_FALSE(j.is_discarded());
  CHECK(j["components"]["optimizer"]["status"] == "present");
  CHECK(j["components"]["scheduler"]["status"] == "present");
  CHECK(j["components"]["counters"]["status"] == "inconsistent");
  CHECK(j["components"]["counters"]["evidence"].get<std::string>().find(
            "global_step 3 disagrees with the optimizer (step 6) and the scheduler (last_epoch 6), "
            "which agree with each other: the file that holds the counter (trainer_state.json) is "
            "from another save") != std::string::npos);
}

}  // namespace

}  // namespace audit_fixtures_test
