// Each component left out of the checkpoints breaks the resumed run in the way DOMAIN.md
// predicts — and only in that way — so each of these tests fails if the component stops mattering
// or starts mattering for the wrong reason. Every run stops at step 60 and resumes to 120.
#include <catch2/catch.hpp>

#include "demo_runs.h"
#include "tests/common/test_util.h"

namespace ckpt::testing::omit_test {
namespace {

constexpr int64_t kStop = 60;
const char* kSteps = "--steps 120 ";

struct Runs {
  TempDir straight_dir, broken_dir;
  std::string straight = straight_dir.path(), broken = broken_dir.path();
  std::map<int64_t, StepRecord> a, b;
  std::string digest_a, digest_b;
};

void run_pair(const std::string& omit, Runs* r) {
  DemoResult a = run_demo(r->straight, kSteps);
  REQUIRE(a.exit_code == 0);
  const std::string args = std::string(kSteps) + "--omit " + omit;
  REQUIRE(run_demo(r->broken, args + " --stop-at " + std::to_string(kStop)).exit_code == 0);
  DemoResult b = run_demo(r->broken, args);
  REQUIRE(b.exit_code == 0);
  REQUIRE(b.output.find("missing: " + omit) != std::string::npos);
  r->a = read_progress(r->straight);
  r->b = read_progress(r->broken);
  r->digest_a = a.final_digest;
  r->digest_b = b.final_digest;
  // Before the restart both runs are the same run.
  for (int64_t s = 0; s < kStop; ++s) REQUIRE(r->a.at(s).loss == r->b.at(s).loss);
  REQUIRE(r->digest_a != r->digest_b);
}

TEST_CASE("omit scheduler: the LR after the restart falls back into warmup", "[torch]") {
  Runs r;
  run_pair("scheduler", &r);
  // The schedule restarts at step 0 of the warmup: LR 0 at the restart, far below the true LR.
  REQUIRE(r.b.at(kStop).lr == r.a.at(0).lr);
  REQUIRE(r.b.at(kStop).lr < 0.1 * r.a.at(kStop).lr);
  REQUIRE(r.b.at(kStop + 5).lr < r.a.at(kStop + 5).lr);
  // Nothing else changed: same samples in the same order.
  for (int64_t s = kStop; s < 120; ++s) REQUIRE(r.b.at(s).batch == r.a.at(s).batch);
}

TEST_CASE("omit loader: the head of the epoch is replayed, the rest is not seen", "[torch]") {
  Runs r;
  run_pair("loader", &r);
  // The epoch counter survived but the position went back to 0: step 60 sees step 0's batch.
  for (int64_t s = kStop; s < 120; ++s) {
    INFO("step " << s);
    REQUIRE(r.b.at(s).batch == r.a.at(s - kStop).batch);
    REQUIRE(r.b.at(s).lr == r.a.at(s).lr);  // the schedule is unaffected
  }
}

TEST_CASE("omit optimizer: moments restart from zero, the loss path diverges after one step",
          "[torch]") {
  Runs r;
  run_pair("optimizer", &r);
  // Same weights, same dropout mask, same batch at the restart step: the same loss ...
  REQUIRE(r.b.at(kStop).loss == r.a.at(kStop).loss);
  // ... then AdamW steps with fresh moments: different weights from the next step on.
  REQUIRE(r.b.at(kStop + 1).loss != r.a.at(kStop + 1).loss);
  for (int64_t s = kStop; s < 120; ++s) {
    REQUIRE(r.b.at(s).lr == r.a.at(s).lr);
    REQUIRE(r.b.at(s).batch == r.a.at(s).batch);
  }
}

TEST_CASE("omit rng: dropout masks differ from the first step after the restart", "[torch]") {
  Runs r;
  run_pair("rng", &r);
  // Same weights, same batch, same LR — only the dropout mask differs, and so does the loss.
  REQUIRE(r.b.at(kStop).batch == r.a.at(kStop).batch);
  REQUIRE(r.b.at(kStop).lr == r.a.at(kStop).lr);
  REQUIRE(r.b.at(kStop).loss != r.a.at(kStop).loss);
}

}  // namespace
}  // namespace ckpt::testing::omit_test
