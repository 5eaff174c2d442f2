// Issue 27's cost cases through the real executable: inputs that made `ckpt audit`, `convert`,
// `diff`, `lr` and `coverage` quadratic (or linear in a dataset's size) must finish, with the
// right answer. The bound is the ctest TIMEOUT of these cases (tests/verify/CMakeLists.txt), not a
// timed assertion; bench/cost_bench.cc measures time and peak RSS against the documented bounds.
#include <sys/wait.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "bench/pathological_inputs.h"
#include "tests/common/test_util.h"

namespace fs = std::filesystem;
using ckpt::testing::TempDir;
using ckpt::testing::write_file;
namespace pi = ckpt::pathological;

namespace {

const std::string kCkpt = (fs::path(CKPT_BINARY_DIR) / "cli" / "ckpt").string();
const fs::path kFixtures = fs::path(CKPT_SOURCE_DIR) / "fixtures";

std::string q(const std::string& p) { return "'" + p + "'"; }

// Runs `ckpt ARGS`; stdout into `out`, stderr discarded unless `err` is given.
int ckpt_cmd(const std::string& args, std::string* out, const std::string& err_file = "") {
  const std::string redirect = err_file.empty() ? " 2>/dev/null" : " 2>" + q(err_file);
  FILE* p = ::popen((q(kCkpt) + " " + args + redirect).c_str(), "r");
  REQUIRE(p != nullptr);
  out->clear();
  char buf[65536];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out->append(buf, n);
  const int status = ::pclose(p);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// A copy of the HF Trainer fixture whose trainer_state.json is `bytes` of NaN-filled log.
std::string hf_folder_with_nans(const std::string& root, size_t bytes) {
  const fs::path dir = fs::path(root) / "checkpoint-6";
  fs::copy(kFixtures / "foreign" / "hf" / "checkpoint-6", dir, fs::copy_options::recursive);
  write_file((dir / "trainer_state.json").string(), pi::hf_trainer_state_with_nans(bytes));
  return dir.string();
}

}  // namespace

TEST_CASE("a 6 MB trainer_state.json full of NaN: audit and diff finish", "[cli][cost]") {
  TempDir tmp;
  const std::string dir = hf_folder_with_nans(tmp.path(), 6u << 20);
  std::string out;
  const int audit = ckpt_cmd("audit --json " + q(dir), &out);
  CHECK((audit == 0 || audit == 2));
  auto j = nlohmann::json::parse(out, nullptr, false);
  REQUIRE_FALSE(j.is_discarded());
  CHECK(j["components"]["counters"]["status"] == "present");
  CHECK(ckpt_cmd("diff " + q(dir) + " " + q(dir), &out) == 0);
}

// Every log_history entry is a group of /extra/trainer_state.json/log_history: written in the
// rank file's unaligned second pass (ckpt/h5/rank_file_write.cc), linear and well under 1 KiB
// an entry, where each took a 4 KiB block of its own and the write was quadratic (minutes).
TEST_CASE("a 2 MB trainer_state.json full of NaN: convert finishes and verifies", "[cli][cost]") {
  TempDir tmp;
  const std::string dir = hf_folder_with_nans(tmp.path(), 2u << 20);
  const std::string text = ckpt::testing::read_file(dir + "/trainer_state.json");
  size_t entries = 0;
  for (size_t at = text.find("\"step\""); at != std::string::npos;
       at = text.find("\"step\"", at + 1)) {
    ++entries;
  }
  const std::string run = tmp.path() + "/run";
  std::string out;
  // 2: training_args.bin stays unmapped (a pickled object), everything else is converted
  REQUIRE(ckpt_cmd("convert --json " + q(dir) + " " + q(run), &out) == 2);
  auto j = nlohmann::json::parse(out, nullptr, false);
  REQUIRE_FALSE(j.is_discarded());
  CHECK(j["step"] == 6);
  CHECK(ckpt_cmd("verify " + q(run), &out) == 0);
  const auto rank_file = fs::path(run) / "step-000000000006" / "rank-00000.h5";
  INFO(entries << " entries, rank file " << fs::file_size(rank_file) << " bytes");
  CHECK(entries > 20000);
  CHECK(fs::file_size(rank_file) < entries * 1024);
}

TEST_CASE("ckpt lr: 20,000 LR columns in a 4 MB CSV finish", "[cli][cost]") {
  TempDir tmp;
  const std::string csv = tmp.path() + "/metrics.csv";
  write_file(csv, pi::csv_with_lr_columns(20000, 4u << 20));
  std::string out;
  REQUIRE(ckpt_cmd("lr --json " + q(csv), &out) == 0);
  auto j = nlohmann::json::parse(out, nullptr, false);
  REQUIRE_FALSE(j.is_discarded());
  CHECK(j["series"].size() == 20000);
}

TEST_CASE("ckpt lr: 300k alternating TensorBoard records finish", "[cli][cost]") {
  TempDir tmp;
  const std::string file = tmp.path() + "/events.out.tfevents.1.host";
  write_file(file, pi::tb_alternating_lr(300000));
  std::string out;
  REQUIRE(ckpt_cmd("lr --json " + q(file), &out) == 2);  // every gap is a discontinuity
  auto j = nlohmann::json::parse(out, nullptr, false);
  REQUIRE_FALSE(j.is_discarded());
  CHECK(j["points"] == 300000);
}

TEST_CASE("ckpt lr: 400k alternating MLflow lines finish", "[cli][cost]") {
  TempDir tmp;
  fs::create_directories(tmp.path() + "/run/metrics");
  write_file(tmp.path() + "/run/meta.yaml", "name: run\n");
  write_file(tmp.path() + "/run/metrics/lr", pi::mlflow_alternating_lr(400000));
  std::string out;
  REQUIRE(ckpt_cmd("lr --json " + q(tmp.path() + "/run"), &out) == 2);
  auto j = nlohmann::json::parse(out, nullptr, false);
  REQUIRE_FALSE(j.is_discarded());
  CHECK(j["points"] == 400000);
}

TEST_CASE("ckpt coverage: a 21-line journal over 10^18 samples finishes", "[cli][cost]") {
  TempDir tmp;
  write_file(tmp.path() + "/journal.jsonl",
             pi::journal_one_sample_per_epoch(1000000000000000000ull, 20));
  std::string out;
  REQUIRE(ckpt_cmd("coverage --json --max-ids 10 " + q(tmp.path()), &out) == 0);
  auto j = nlohmann::json::parse(out, nullptr, false);
  REQUIRE_FALSE(j.is_discarded());
  CHECK(j["epochs"].size() == 20);
  CHECK(j["overall"]["unique"] == 20);  // one sample per epoch, 20 epochs, 20 distinct orders
}

TEST_CASE("ckpt coverage --run-spec: a torch sampler over 10^9 samples is refused at once",
          "[cli][cost]") {
  TempDir tmp;
  const std::string spec = tmp.path() + "/run.json";
  write_file(spec, pi::torch_run_spec(1000000000ull));
  std::string out;
  const std::string err = tmp.path() + "/err";
  CHECK(ckpt_cmd("coverage --run-spec " + q(spec), &out, err) == 65);
  const std::string msg = ckpt::testing::read_file(err);
  CHECK(msg.find("over the 268435456-sample limit") != std::string::npos);
  CHECK(std::count(msg.begin(), msg.end(), '\n') == 1);
}
