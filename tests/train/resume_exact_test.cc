// The core promise, end to end: a run stopped and resumed in fresh processes (preempted mid-epoch,
// preempted at an epoch boundary, crashed between saves) ends bit-identical to the run that never
// stopped, with the same per-step loss, LR and sample order.
#include <catch2/catch.hpp>

#include "demo_runs.h"
#include "tests/common/test_util.h"

namespace ckpt::testing::resume_exact_test {
namespace {

using Dir = TempDir;

void expect_identical_runs(const std::string& common, int64_t mid_epoch, int64_t epoch_boundary,
                           int64_t crash) {
  Dir straight, restarted;
  DemoResult a = run_demo(straight.path(), common);
  REQUIRE(a.exit_code == 0);
  REQUIRE(a.final_digest.size() == 16);

  DemoResult r1 = run_demo(restarted.path(), common + " --stop-at " + std::to_string(mid_epoch));
  REQUIRE(r1.exit_code == 0);
  DemoResult r2 =
      run_demo(restarted.path(), common + " --stop-at " + std::to_string(epoch_boundary));
  REQUIRE(r2.exit_code == 0);
  REQUIRE(r2.output.find("restored step-") != std::string::npos);
  DemoResult r3 = run_demo(restarted.path(), common + " --crash-at " + std::to_string(crash));
  REQUIRE(r3.exit_code == 3);
  DemoResult r4 = run_demo(restarted.path(), common);
  REQUIRE(r4.exit_code == 0);
  INFO(r4.output);
  REQUIRE(r4.final_digest == a.final_digest);

  auto pa = read_progress(straight.path());
  auto pb = read_progress(restarted.path());
  REQUIRE(pa.size() == pb.size());
  for (const auto& [step, rec] : pa) {
    INFO("step " << step);
    const StepRecord& other = pb.at(step);
    REQUIRE(other.lr == rec.lr);  // bitwise: same double
    REQUIRE(other.loss == rec.loss);
    REQUIRE(other.batch == rec.batch);
    REQUIRE(other.epoch == rec.epoch);
    REQUIRE(other.position == rec.position);
  }
  // The crash redid the steps after the last save: they appear twice in the journal, identically.
  auto all = read_all_progress(restarted.path());
  REQUIRE(all.size() > pb.size());
}

TEST_CASE("restarts mid-epoch, at an epoch boundary and after a crash are bit-exact", "[torch]") {
  // 3000 samples, batch 16: 188 steps per epoch; saves every 25 steps.
  expect_identical_runs("--steps 200", 60, 188, 195);
}

TEST_CASE("restarts from checkpoints written in the background are bit-exact", "[torch]") {
  // --async-save: every save returns after the snapshot; --stop-at waits for it, --crash-at
  // does not (the save in flight dies with the process, the run resumes from an older one).
  expect_identical_runs("--steps 200 --async-save", 60, 188, 195);
}

TEST_CASE("bit-exact with 2 sampler ranks", "[torch]") {
  // 2 × 16 per step: 94 steps per epoch.
  expect_identical_runs("--steps 200 --world-size 2", 50, 94, 140);
}

}  // namespace
}  // namespace ckpt::testing::resume_exact_test
