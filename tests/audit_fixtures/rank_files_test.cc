// Per-rank RNG files of a 2-process Accelerate save (fixtures/foreign/accelerate_ddp/step-3,
// written by make_accelerate_ddp.py), through the real `ckpt` executable, on copies edited here:
// a gap in the numbering, and a cadence that contradicts the files. The untouched folder and the
// one without random_states_1.pkl are EXPECTED.json cases (accelerate_ddp/EXPECTED.json).
#include <catch2/catch.hpp>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "tests/common/run_cli.h"

namespace rank_files_test {
namespace {

namespace fs = std::filesystem;
using ckpt_test::FolderCopy;
using ckpt_test::quote;
using nlohmann::json;

const fs::path kSave =
    fs::path(CKPT_SOURCE_DIR) / "fixtures" / "foreign" / "accelerate_ddp" / "step-3";

json audit(const fs::path& p, int* rc) {
  return ckpt_test::run_ckpt_json("audit --json " + quote(p.string()), rc);
}

std::string evidence(const json& j, const char* component) {
  return j["components"][component]["evidence"].get<std::string>();
}

TEST_CASE("Accelerate: every process's random_states_N.pkl is checked", "[verify]") {
  int rc = -1;
  SECTION("a gap in the numbering (rank 1's file renamed to rank 2's): rank 1 is named") {
    FolderCopy c(kSave, "acc_gap");
    fs::rename(c.root / "random_states_1.pkl", c.root / "random_states_2.pkl");
    json j = audit(c.root, &rc);
    CHECK(rc == 2);
    CHECK(j["components"]["rng_cpu"]["status"] == "inconsistent");
    const std::string e = evidence(j, "rng_cpu");
    CHECK(e.find("random_states_1.pkl is missing (1 of ranks 0..2): that rank resumes with a "
                 "fresh RNG") != std::string::npos);
    // Files of rank 2 contradict the cadence's 2 processes: no inference, so the scheduler is
    // judged at one step per step and last_epoch 6 against global_step 3 is reported.
    CHECK(j["components"]["scheduler"]["status"] == "inconsistent");
    CHECK(evidence(j, "scheduler").find("last_epoch 6 != global_step 3") != std::string::npos);
  }
  SECTION("the complete save: both files checked, the scheduler at Accelerate's cadence") {
    json j = audit(kSave, &rc);
    CHECK(rc == 0);
    CHECK(j["complete"] == true);
    CHECK(evidence(j, "rng_cpu").find("each checked: random_states_0.pkl, random_states_1.pkl") !=
          std::string::npos);
  }
  SECTION("both RNG files lost: the cadence still says 2 processes, both ranks named") {
    FolderCopy c(kSave, "acc_none");
    fs::remove(c.root / "random_states_0.pkl");
    fs::remove(c.root / "random_states_1.pkl");
    json j = audit(c.root, &rc);
    CHECK(rc == 2);
    CHECK(j["components"]["rng_cpu"]["status"] != "present");
    bool named = false;
    for (const auto& f : j["findings"]) {
      const std::string m = f["message"].get<std::string>();
      named = named || (m.find("random_states_0.pkl, random_states_1.pkl are missing (2 of 2") !=
                            std::string::npos &&
                        m.find("ranks 0, 1 start from a fresh RNG") != std::string::npos);
    }
    CHECK(named);
  }
}

}  // namespace

}  // namespace rank_files_test
