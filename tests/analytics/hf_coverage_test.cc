// `ckpt coverage HF_DIR` on real Hugging Face Trainer output folders, no hand-written spec:
// fixtures/analytics/make_hf_coverage_fixtures.py ran one Trainer job killed twice, with
// ignore_data_skip True and False, and recorded in visits.json every index its dataset was asked
// for. The run spec derived from the folder alone must replay exactly those visits.
#include <catch2/catch.hpp>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "analytics/coverage/coverage.h"
#include "analytics/coverage/hf_run.h"
#include "analytics/coverage/run_spec.h"
#include "analytics/input/json_text.h"
#include "analytics/lr/lr_analysis.h"
#include "analytics/lr/lr_input.h"
#include "cli/commands.h"
#include "cli/hf_training_args.h"
#include "tests/analytics/test_support.h"

namespace ckpt::analytics::hf_coverage_test {
namespace {

using testing::fixture;

struct Truth {
  uint64_t dataset_size = 0;
  std::map<uint64_t, int64_t> visits_per_id;
  int64_t redone_steps = 0;  // steps logged by more than one launch
};

Truth truth_of(const std::string& dir) {
  auto text = read_text_file(Env::posix(), dir + "/visits.json");
  REQUIRE(text.is_ok());
  const auto j = nlohmann::json::parse(*text);
  Truth t;
  t.dataset_size = j["dataset_size"].get<uint64_t>();
  std::map<int64_t, int> launches_per_step;
  for (const auto& launch : j["launches"]) {
    for (const auto& step : launch) {
      ++launches_per_step[step[0].get<int64_t>()];
      for (const auto& id : step[1]) ++t.visits_per_id[id.get<uint64_t>()];
    }
  }
  for (const auto& [step, n] : launches_per_step) t.redone_steps += n - 1;
  return t;
}

std::map<uint64_t, int64_t> replayed_visits(const CoverageInput& in) {
  std::map<uint64_t, int64_t> out;
  for (const auto& v : in.visits) {
    auto order = make_order(in.sampler, v.order_key);
    REQUIRE(order.is_ok());
    for (uint64_t p = v.begin; p < v.end; ++p) ++out[(*order)->id_at(p % (*order)->size())];
  }
  return out;
}

TEST_CASE("Hugging Face folders: the derived run spec replays the visits the job really made",
          "[analytics]") {
  for (const bool skip : {false, true}) {
    CAPTURE(skip);
    const std::string dir = fixture(skip ? "hf_cov/skip" : "hf_cov/noskip");
    const Truth truth = truth_of(dir);
    REQUIRE(is_hf_output_dir(Env::posix(), dir));
    auto facts = scan_hf_output_dir(Env::posix(), dir);
    REQUIRE(facts.is_ok());
    CHECK(facts->world_size == 1);
    CHECK(facts->launches.size() == 3);
    auto args =
        cli::read_hf_training_args(Env::posix(), facts->newest_checkpoint + "/training_args.bin");
    REQUIRE(args.is_ok());
    CHECK(args->per_device_train_batch_size == 4);
    CHECK(args->gradient_accumulation_steps == 1);
    CHECK(args->seed == 7);
    CHECK(args->ignore_data_skip == skip);
    CHECK(args->dataloader_drop_last == false);
    auto derived = derive_hf_run_spec(*facts, *args, truth.dataset_size);
    REQUIRE(derived.is_ok());
    auto input = replay_run(derived->spec);
    REQUIRE(input.is_ok());
    const auto replayed = replayed_visits(*input);
    std::string diff;  // the ids whose visit counts differ, for the failure message
    for (uint64_t id = 0; id < truth.dataset_size; ++id) {
      const int64_t want = truth.visits_per_id.count(id) ? truth.visits_per_id.at(id) : 0;
      const int64_t got = replayed.count(id) ? replayed.at(id) : 0;
      if (want != got)
        diff += " id " + std::to_string(id) + ": " + std::to_string(got) + " vs " +
                std::to_string(want);
    }
    CAPTURE(diff);
    CHECK(replayed == truth.visits_per_id);

    auto report = compute_coverage(*input, {});
    REQUIRE(report.is_ok());
    uint64_t never = 0, repeats = 0;
    for (const auto& e : report->epochs) {
      never += e.never_visited_count;
      repeats += e.repeats;
    }
    if (skip) {
      // Each relaunch went back to the head of epoch 1: repeats, and most of the last epoch
      // never seen.
      CHECK(repeats > static_cast<uint64_t>(truth.redone_steps) * 4);
      CHECK(never > 0);
    } else {
      // Exactly once, up to the steps HF itself redid after each kill.
      CHECK(never == 0);
      CHECK(repeats == static_cast<uint64_t>(truth.redone_steps) * 4);
    }
  }
}

TEST_CASE("ckpt coverage HF_DIR: asks for the dataset size, prints the spec, states assumptions",
          "[analytics]") {
  std::ostringstream out, err;
  cli::CoverageCommandOptions o;
  o.run_dir = fixture("hf_cov/skip");
  CHECK(cli::run_coverage_command(o, Env::posix(), out, err) == 64);
  CHECK(err.str().find("--dataset-size") != std::string::npos);

  o.dataset_size = 64;
  o.print_spec = true;
  CHECK(cli::run_coverage_command(o, Env::posix(), out, err) == 0);
  auto spec = parse_run_spec(out.str(), "printed");
  REQUIRE(spec.is_ok());  // what --print-spec prints, --run-spec reads
  CHECK(spec->segments.size() == 3);

  out.str("");
  o.print_spec = false;
  o.json = true;
  CHECK(cli::run_coverage_command(o, Env::posix(), out, err) == 0);
  const auto j = nlohmann::json::parse(out.str());
  CHECK(j["derived_spec"]["sampler"]["kind"] == "torch_distributed");
  CHECK(j["assumptions"].size() >= 2);
  CHECK(j["certainty"].get<std::string>().rfind("exact", 0) == 0);
}

TEST_CASE("ckpt lr on the same Hugging Face folder: its TensorBoard launches and redone steps",
          "[analytics]") {
  const std::string dir = fixture("hf_cov/noskip");
  const Truth truth = truth_of(dir);
  auto s = load_lr_series(Env::posix(), dir, "auto");
  REQUIRE(s.is_ok());
  CHECK(s->format == "tensorboard");
  CHECK(s->tag == "train/learning_rate");
  CHECK(s->launches.size() == 3);
  CHECK(s->restarts == std::vector<int64_t>{21, 31});  // HF logs global steps from 1
  int64_t redone = 0;
  for (const auto& r : s->redone) redone += r.points;
  CHECK(redone == truth.redone_steps);  // logging_steps 1: every redone step is a point
  CHECK(analyze_lr(*s, {}).discontinuities.empty());  // the scheduler was restored
}

}  // namespace
}  // namespace ckpt::analytics::hf_coverage_test
