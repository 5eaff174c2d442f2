#include "analytics/coverage/coverage.h"

#include <sys/stat.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "analytics/coverage/checkpoint_cursors.h"
#include "analytics/coverage/coverage_from_journal.h"
#include "analytics/coverage/run_spec.h"
#include "analytics/input/json_text.h"
#include "analytics/lr/checkpoint_lr.h"
#include "ckpt/io/mem_env.h"
#include "ckpt/loader/resumable_sampler.h"
#include "ckpt/sched/schedule.h"
#include "ckpt/store/journal.h"
#include "cli/commands.h"
#include "tests/analytics/test_support.h"

namespace ckpt::analytics::coverage_test {
namespace {

using cli::CoverageCommandOptions;
using cli::run_coverage_command;

using testing::fixture;
using testing::ScratchDir;

Result<CoverageReport> coverage_of_spec(const RunSpec& spec, uint64_t max_ids = 1u << 30) {
  CKPT_ASSIGN_OR_RETURN(CoverageInput in, replay_run(spec));
  CoverageOptions o;
  o.max_ids = max_ids;
  return compute_coverage(in, o);
}

TEST_CASE("torch samplers: coverage equals what PyTorch's samplers drew", "[analytics][torch]") {
  for (const char* name : {"cov_dist_frequent_restarts", "cov_dist_padding", "cov_dist_drop_last",
                           "cov_random_reseeded", "cov_sequential"}) {
    CAPTURE(name);
    auto spec = read_run_spec(Env::posix(), fixture(std::string(name) + ".json"));
    REQUIRE(spec.is_ok());
    auto report = coverage_of_spec(*spec);
    REQUIRE(report.is_ok());
    auto text = read_text_file(Env::posix(), fixture(std::string(name) + ".expected.json"));
    REQUIRE(text.is_ok());
    const auto want = nlohmann::json::parse(*text);
    REQUIRE(report->epochs.size() == want["epochs"].size());
    for (size_t i = 0; i < report->epochs.size(); ++i) {
      const auto& got = report->epochs[i];
      const auto& exp = want["epochs"][i];
      CAPTURE(i);
      CHECK(got.epoch == exp["epoch"].get<uint64_t>());
      CHECK(got.unique == exp["unique"].get<uint64_t>());
      CHECK(got.visits == exp["visits"].get<uint64_t>());
      CHECK(got.repeats == exp["repeats"].get<uint64_t>());
      CHECK(got.never_visited_count == exp["never_visited_count"].get<uint64_t>());
      CHECK(got.never_visited_ids == exp["never_visited"].get<std::vector<uint64_t>>());
    }
    CHECK(report->overall_unique == want["overall"]["unique"].get<uint64_t>());
  }
}

TEST_CASE("the fixtures exercise what they claim", "[analytics]") {
  auto text = read_text_file(Env::posix(), fixture("cov_dist_frequent_restarts.expected.json"));
  REQUIRE(text.is_ok());
  const auto frequent = nlohmann::json::parse(*text);
  // Restarts more often than an epoch: epoch 0 never completes.
  REQUIRE(frequent["epochs"].size() == 1);
  CHECK(frequent["epochs"][0]["never_visited_count"].get<int>() > 0);
  text = read_text_file(Env::posix(), fixture("cov_dist_padding.expected.json"));
  REQUIRE(text.is_ok());
  const auto padding = nlohmann::json::parse(*text);
  // 100 samples on 3 ranks: two padded samples repeat in the first, uninterrupted epoch.
  CHECK(padding["epochs"][0]["repeats"].get<int>() == 2);
}

// Brute force with the loader's own ResumableSampler: every rank's batch of every step.
std::map<uint64_t, std::vector<uint64_t>> brute_force(const RunSpec& spec) {
  loader::SamplerSpec ls;
  ls.dataset_size = spec.sampler.dataset_size;
  ls.seed = spec.sampler.seed;
  ls.shuffle = spec.sampler.shuffle;
  ls.drop_last = spec.sampler.drop_last;
  ls.world_size = spec.sampler.world_size;
  ls.batch_size = spec.sampler.batch_size;
  loader::ResumableSampler sampler(ls, 0);
  std::map<uint64_t, std::vector<uint64_t>> visits;
  std::vector<std::map<int64_t, loader::LoaderCursor>> at;  // per segment: cursor at each step
  for (size_t i = 0; i < spec.segments.size(); ++i) {
    const auto& seg = spec.segments[i];
    loader::LoaderCursor c;
    if (i > 0) {
      for (size_t j = i; j-- > 0;) {
        if (at[j].count(seg.start_step)) {
          c = at[j][seg.start_step];
          break;
        }
      }
      if (!seg.loader_resumed) c.position = 0;
    }
    std::map<int64_t, loader::LoaderCursor> mine;
    for (int64_t step = seg.start_step; step < seg.end_step; ++step) {
      if (sampler.at_epoch_end(c)) c = {c.epoch + 1, 0};
      mine[step] = c;
      for (uint32_t r = 0; r < ls.world_size; ++r) {
        for (uint64_t id : sampler.batch_at(c, r)) visits[c.epoch].push_back(id);
      }
      sampler.set_cursor(c);
      sampler.next_batch();
      c = sampler.cursor();
    }
    mine[seg.end_step] = c;
    at.push_back(std::move(mine));
  }
  return visits;
}

void check_against_brute_force(const RunSpec& spec) {
  auto report = coverage_of_spec(spec);
  REQUIRE(report.is_ok());
  const auto truth = brute_force(spec);
  REQUIRE(report->epochs.size() == truth.size());
  size_t i = 0;
  std::set<uint64_t> any;
  for (const auto& [epoch, ids] : truth) {
    const auto& got = report->epochs[i++];
    const std::set<uint64_t> uniq(ids.begin(), ids.end());
    any.insert(uniq.begin(), uniq.end());
    std::vector<uint64_t> never;
    for (uint64_t id = 0; id < spec.sampler.dataset_size; ++id) {
      if (!uniq.count(id)) never.push_back(id);
    }
    CAPTURE(epoch);
    CHECK(got.epoch == epoch);
    CHECK(got.visits == ids.size());
    CHECK(got.unique == uniq.size());
    CHECK(got.repeats == ids.size() - uniq.size());
    CHECK(got.never_visited_ids == never);
  }
  CHECK(report->overall_unique == any.size());
}

TEST_CASE("ckpt sampler: interval arithmetic equals the loader's own batches", "[analytics]") {
  RunSpec spec;
  spec.sampler.kind = SamplerKind::kCkpt;
  spec.sampler.dataset_size = 1000;
  spec.sampler.seed = 11;
  spec.sampler.world_size = 3;
  spec.sampler.batch_size = 7;  // 21 per step: 48 steps per epoch, the last one short
  SECTION("loader position lost at each restart; the epoch counter survives") {
    spec.segments = {{0, 30, false}, {30, 60, false}, {50, 90, false}, {90, 100, false}};
    check_against_brute_force(spec);
  }
  SECTION("loader resumed exactly, with a crash redoing steps") {
    spec.segments = {{0, 30, false}, {20, 70, true}, {70, 150, true}};
    check_against_brute_force(spec);
  }
  SECTION("drop_last and restarts more frequent than an epoch") {
    spec.sampler.drop_last = true;
    spec.segments = {{0, 20, false}, {20, 40, false}, {40, 60, false}, {60, 200, true}};
    check_against_brute_force(spec);
  }
  SECTION("sequential order") {
    spec.sampler.shuffle = false;
    spec.segments = {{0, 30, false}, {30, 55, false}};
    check_against_brute_force(spec);
  }
}

TEST_CASE("10^9 samples: intervals, exact counts, the first never-visited ids", "[analytics]") {
  RunSpec spec;
  spec.sampler.kind = SamplerKind::kCkpt;
  spec.sampler.dataset_size = 1'000'000'000;
  spec.sampler.seed = 3;
  spec.sampler.world_size = 8;
  spec.sampler.batch_size = 512;
  for (int64_t r = 0; r < 10; ++r) spec.segments.push_back({r * 1000, (r + 1) * 1000, false});
  auto report = coverage_of_spec(spec, 1000);
  REQUIRE(report.is_ok());
  REQUIRE(report->epochs.size() == 1);
  const auto& e = report->epochs[0];
  const uint64_t seen = 1000ull * 8 * 512;
  CHECK(e.unique == seen);
  CHECK(e.repeats == 9 * seen);
  CHECK(e.never_visited_count == 1'000'000'000ull - seen);
  REQUIRE(e.never_visited_ids.size() == 1000);
  CHECK(std::is_sorted(e.never_visited_ids.begin(), e.never_visited_ids.end()));
  loader::EpochPermutation order(1'000'000'000, 3, 0);
  uint64_t expect_id = 0;
  for (uint64_t id : e.never_visited_ids) {
    // Every id skipped on the way was visited (its position is inside the head).
    while (order.index_of(expect_id) < seen) ++expect_id;
    CHECK(id == expect_id);
    ++expect_id;
  }
  REQUIRE(e.never_visited_positions.size() == 1);
  CHECK(e.never_visited_positions[0].begin == seen);
}

std::string journal_line(const char* fmt, long long a, long long b, long long c) {
  char buf[400];
  std::snprintf(buf, sizeof buf, fmt, a, b, c);
  return buf;
}

// A journal as our training library writes it, with the loader cursor restored or lost.
std::string synthetic_journal(bool loader_restored) {
  loader::SamplerSpec ls;
  ls.dataset_size = 500;
  ls.seed = 9;
  ls.batch_size = 10;
  ls.world_size = 2;
  loader::ResumableSampler sampler(ls, 0);
  std::string j;
  const char* start =
      "{\"event\":\"start\",\"time\":0,\"step\":%lld,\"fresh\":%s,\"grad_accum\":1,"
      "\"sampler\":{\"dataset_size\":500,\"seed\":9,\"shuffle\":true,\"drop_last\":false,"
      "\"world_size\":2,\"batch_size\":10,\"kind\":\"ckpt\"}}\n";
  std::map<int64_t, loader::LoaderCursor> at;
  loader::LoaderCursor c;
  int64_t step = 0;
  for (int64_t stop : {20, 40, 60, 80}) {
    char buf[400];
    std::snprintf(buf, sizeof buf, start, static_cast<long long>(step), step ? "false" : "true");
    j += buf;
    if (step > 0) {
      c = at[step];
      if (!loader_restored) c.position = 0;
      j += journal_line(
          "{\"event\":\"restore\",\"time\":1,\"step\":%lld,\"checkpoint\":\"x\","
          "\"restored\":[],\"missing\":[],\"loader\":{\"epoch\":%lld,"
          "\"position\":%lld}}\n",
          step, static_cast<long long>(c.epoch), static_cast<long long>(c.position));
    }
    for (; step < stop; ++step) {
      if (sampler.at_epoch_end(c)) c = {c.epoch + 1, 0};
      at[step] = c;
      j += journal_line(
          "{\"event\":\"progress\",\"time\":2,\"step\":%lld,\"lr\":0.1,\"loss\":1,"
          "\"epoch\":%lld,\"position\":%lld,\"samples\":20}\n",
          step, static_cast<long long>(c.epoch), static_cast<long long>(c.position));
      sampler.set_cursor(c);
      sampler.next_batch();
      c = sampler.cursor();
    }
    at[step] = c;
  }
  return j;
}

TEST_CASE("our journal: a lost loader cursor shows repeats and never-visited samples",
          "[analytics]") {
  for (bool restored : {true, false}) {
    CAPTURE(restored);
    auto journal = parse_journal(synthetic_journal(restored), "journal.jsonl");
    REQUIRE(journal.is_ok());
    auto in = coverage_input_from_journal(*journal);
    REQUIRE(in.is_ok());
    CHECK(in->restarts.size() == 3);
    auto report = compute_coverage(*in, {});
    REQUIRE(report.is_ok());
    uint64_t repeats = 0, never_before_last = 0;
    for (size_t i = 0; i < report->epochs.size(); ++i) {
      repeats += report->epochs[i].repeats;
      if (i + 1 < report->epochs.size()) never_before_last += report->epochs[i].never_visited_count;
    }
    if (restored) {
      CHECK(repeats == 0);
      CHECK(never_before_last == 0);
      CHECK(report->epochs.size() == 4);  // 80 steps of 20 over 500 samples (25 steps/epoch)
    } else {
      CHECK(repeats > 0);
      // Restarts every 20 steps, an epoch is 25: epoch 0 never completes.
      REQUIRE(report->epochs.size() == 1);
      CHECK(report->epochs[0].never_visited_count == 100);
      CHECK(report->epochs[0].repeats == 1200);
    }
  }
}

TEST_CASE("bad run specs: one line naming the file, exit 64 / 65 / 66", "[analytics]") {
  ScratchDir dir;
  std::ostringstream out, err;
  CoverageCommandOptions o;
  CHECK(run_coverage_command(o, Env::posix(), out, err) == 64);
  o.run_spec = dir.file("nokey.json",
                        "{\"batch_size\": 4, \"sampler\": {\"kind\": \"ckpt\"}, "
                        "\"segments\": [{\"start_step\": 0, \"end_step\": 3}]}");
  err.str("");
  CHECK(run_coverage_command(o, Env::posix(), out, err) == 65);
  CHECK(err.str().find("nokey.json") != std::string::npos);
  CHECK(err.str().find("dataset_size") != std::string::npos);
  const std::string message = err.str();
  CHECK(std::count(message.begin(), message.end(), '\n') == 1);

  o.run_spec = dir.file("gap.json",
                        "{\"dataset_size\": 10, \"batch_size\": 2, \"sampler\": "
                        "{\"kind\": \"ckpt\"}, \"segments\": [{\"start_step\": 0, "
                        "\"end_step\": 3}, {\"start_step\": 5, \"end_step\": 6}]}");
  CHECK(run_coverage_command(o, Env::posix(), out, err) == 65);
  o.run_spec = dir.file("kind.json",
                        "{\"dataset_size\": 10, \"batch_size\": 2, \"sampler\": "
                        "{\"kind\": \"magic\"}, \"segments\": [{\"start_step\": 0, "
                        "\"end_step\": 3}]}");
  CHECK(run_coverage_command(o, Env::posix(), out, err) == 65);
  o.run_spec = dir.file("trunc.json", "{\"dataset_size\": 10, ");
  CHECK(run_coverage_command(o, Env::posix(), out, err) == 65);
  o.run_spec = dir.path() + "/absent.json";
  CHECK(run_coverage_command(o, Env::posix(), out, err) == 66);
  o.run_spec.clear();
  o.run_dir = dir.path();  // no journal.jsonl
  CHECK(run_coverage_command(o, Env::posix(), out, err) == 66);
}

TEST_CASE("coverage JSON: keys, exact counts, ids up to --max-ids", "[analytics]") {
  std::ostringstream out, err;
  CoverageCommandOptions o;
  ScratchDir dir;
  o.run_spec = dir.file("spec.json",
                        "{\"dataset_size\": 100, \"batch_size\": 5, \"world_size\": "
                        "2, \"sampler\": {\"kind\": \"ckpt\", \"seed\": 4}, "
                        "\"segments\": [{\"start_step\": 0, \"end_step\": 4}, "
                        "{\"start_step\": 4, \"end_step\": 6}]}");
  o.json = true;
  o.max_ids = 7;
  REQUIRE(run_coverage_command(o, Env::posix(), out, err) == 0);
  const auto j = nlohmann::json::parse(out.str());
  CHECK(j["dataset_size"] == 100);
  REQUIRE(j["epochs"].size() == 1);
  CHECK(j["epochs"][0]["unique"] == 40);
  CHECK(j["epochs"][0]["repeats"] == 20);
  CHECK(j["epochs"][0]["never_visited_count"] == 60);
  CHECK(j["epochs"][0]["never_visited"].size() == 7);
  CHECK(j["overall"]["fraction"].get<double>() == Approx(0.4));
}

TEST_CASE("the demo run: --omit loader repeats samples, a full checkpoint does not",
          "[analytics]") {
  // CKPT_TRAIN_DEMO may point at a demo built elsewhere (another build directory).
  const char* env = std::getenv("CKPT_TRAIN_DEMO");
  const std::string demo =
      env != nullptr ? env : std::string(CKPT_BINARY_DIR) + "/examples/ckpt-train-demo";
  struct stat st;
  if (::stat(demo.c_str(), &st) != 0) {
    WARN("skipped: " << demo << " is not built yet");
    return;
  }
  for (bool omit : {false, true}) {
    CAPTURE(omit);
    ScratchDir dir;
    const std::string run = dir.path() + "/run";
    const std::string extra = omit ? " --omit loader" : "";
    const std::string first = demo + " --run-dir " + run +
                              " --steps 250 --stop-at 45 --save-every 15" + extra + " > " +
                              dir.path() + "/log1 2>&1";
    const std::string second = demo + " --run-dir " + run + " --steps 250 --save-every 15" + extra +
                               " > " + dir.path() + "/log2 2>&1";
    REQUIRE(std::system(first.c_str()) == 0);
    REQUIRE(std::system(second.c_str()) == 0);
    auto in = coverage_input_from_run(Env::posix(), run);
    REQUIRE(in.is_ok());
    auto report = compute_coverage(*in, {});
    REQUIRE(report.is_ok());
    uint64_t repeats = 0, never_before_last = 0;
    for (size_t i = 0; i < report->epochs.size(); ++i) {
      repeats += report->epochs[i].repeats;
      if (i + 1 < report->epochs.size()) never_before_last += report->epochs[i].never_visited_count;
    }
    // 3000 samples in batches of 16: 188 steps per epoch, so 250 steps finish epoch 0.
    REQUIRE(report->epochs.size() == 2);
    // The checkpoints' own loader cursors (every rank) against the journal.
    auto journal = read_journal(Env::posix(), run);
    REQUIRE(journal.is_ok());
    auto checks = check_checkpoint_cursors(Env::posix(), run, *journal);
    REQUIRE(checks.is_ok());
    REQUIRE_FALSE(checks->empty());
    for (const auto& c : *checks) {
      CAPTURE(c.name, c.problem);
      CHECK(c.ranks >= 1);
      CHECK(c.ok() == !omit);
      CHECK(c.cursor.has_value() == !omit);
      if (!omit) CHECK(c.journal_cursor.has_value());
    }
    // Without the journal, the checkpoints' scheduler components still give the LR.
    auto lr = lr_from_checkpoints(Env::posix(), run);
    REQUIRE(lr.is_ok());
    REQUIRE(lr->schedule.has_value());
    REQUIRE_FALSE(lr->points.empty());
    for (const auto& p : lr->points) {
      CHECK(p.lr == Approx(sched::lr_at(*lr->schedule, p.step)).epsilon(1e-9));
    }
    if (omit) {
      CHECK(repeats == 45 * 16);  // the head of epoch 0 again after the stop at step 45
      CHECK(report->epochs.back().never_visited_count > 0);
    } else {
      CHECK(repeats == 0);
      CHECK(never_before_last == 0);
    }
  }
}

}  // namespace
}  // namespace ckpt::analytics::coverage_test

namespace ckpt::analytics::coverage_test {
namespace {

// A store's journal comes in segments (ckpt/store/journal.h): `ckpt lr` and `ckpt coverage` read
// them all, in order, and a bad line names the segment it is in.
TEST_CASE("the analytics read a journal kept in segments whole, in order", "[analytics]") {
  MemEnv env;
  {
    auto j = store::Journal::open_segmented(&env, "/run", 600);
    REQUIRE(j.is_ok());
    for (int64_t step = 0; step < 40; ++step) {
      REQUIRE((*j)->append(store::JournalEventType::kProgress, {{"step", step}, {"lr", 0.1}},
                           step % 5 == 0)
                  .is_ok());
    }
  }
  REQUIRE(env.exists("/run/" + store::journal_segment_name(2)));
  auto journal = read_journal(&env, "/run");
  INFO(journal.status().to_string());
  REQUIRE(journal.is_ok());
  REQUIRE(journal->events.size() == 40);
  for (int64_t step = 0; step < 40; ++step) CHECK(journal->events[step].step == step);
  auto seg = env.read_all("/run/" + store::journal_segment_name(2), 1 << 20);
  REQUIRE(seg.is_ok());
  REQUIRE(env.write_atomic("/run/" + store::journal_segment_name(2),
                           *seg + "{\"event\": \"progress\"}\n")
              .is_ok());
  auto bad = read_journal(&env, "/run");
  REQUIRE_FALSE(bad.is_ok());
  CHECK(bad.status().message().find(store::journal_segment_name(2) + ":") != std::string::npos);
}

}  // namespace
}  // namespace ckpt::analytics::coverage_test
