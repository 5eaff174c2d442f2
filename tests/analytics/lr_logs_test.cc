// `ckpt lr` on the logs other tools write: TensorBoard event files (three scalar encodings,
// several launches, a torn last record), Lightning's metrics.csv with two param groups, an MLflow
// file-store run. Fixtures: fixtures/analytics/make_log_fixtures.py (logs/VERSIONS.json); the
// ground truth each scenario was generated with is logs/expected.json.
#include <sys/stat.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "analytics/input/json_text.h"
#include "analytics/lr/lr_analysis.h"
#include "analytics/lr/lr_input.h"
#include "analytics/lr/lr_log.h"
#include "analytics/lr/tb/tb_events.h"
#include "analytics/lr/tb/tfrecord.h"
#include "bench/pathological_inputs.h"
#include "cli/commands.h"
#include "tests/analytics/test_support.h"

namespace ckpt::analytics::lr_logs_test {
namespace {

using cli::LrCommandOptions;
using cli::run_lr_command;
using testing::fixture;
using testing::ScratchDir;

nlohmann::json expected() {
  auto text = read_text_file(Env::posix(), fixture("logs/expected.json"));
  REQUIRE(text.is_ok());
  return nlohmann::json::parse(*text);
}

std::vector<int64_t> steps_of(const nlohmann::json& j) { return j.get<std::vector<int64_t>>(); }

std::vector<int64_t> tail(std::vector<int64_t> v) {
  v.erase(v.begin());
  return v;
}

TEST_CASE("TensorBoard, scheduler lost at two relaunches: warmup restarts at the boundaries",
          "[analytics]") {
  const auto want = expected()["tb_sched_lost"];
  auto all = load_lr_log(Env::posix(), fixture("logs/tb_sched_lost"), "auto", "");
  REQUIRE(all.is_ok());
  REQUIRE(all->size() == 1);
  const LrSeries& s = all->front();
  CHECK(s.format == "tensorboard");
  CHECK(s.tag == "train/learning_rate");
  CHECK(s.launches.size() == 3);
  CHECK(s.restarts == tail(steps_of(want["launch_starts"])));
  // The torn last record of the killed launch is reported, naming the file.
  REQUIRE(s.warnings.size() == 1);
  CHECK(s.warnings[0].find(want["torn_file"].get<std::string>()) != std::string::npos);
  CHECK(s.warnings[0].find("torn last record") != std::string::npos);
  const LrAnalysis a = analyze_lr(s, {});
  REQUIRE(a.discontinuities.size() == 2);
  for (size_t i = 0; i < 2; ++i) {
    CHECK(a.discontinuities[i].step == want["warmup_restarts"][i].get<int64_t>());
    CHECK(a.discontinuities[i].kind == JumpKind::kRestartedWarmup);
    CHECK(a.discontinuities[i].at_restart);
    CHECK_FALSE(a.discontinuities[i].restart_inferred);
  }
}

TEST_CASE("TensorBoard, scheduler kept (tensor float_val form): continuous, warmup end too",
          "[analytics]") {
  const auto want = expected()["tb_sched_kept"];
  auto s = load_lr_series(Env::posix(), fixture("logs/tb_sched_kept"), "auto");
  REQUIRE(s.is_ok());
  CHECK(s->restarts == tail(steps_of(want["launch_starts"])));
  CHECK(s->points.size() == 60);
  const int64_t warmup_end = want["warmup_end"].get<int64_t>();
  CHECK(s->points.front().step < warmup_end);
  CHECK(s->points.back().step > warmup_end);
  CHECK(analyze_lr(*s, {}).discontinuities.empty());
  CHECK(s->warnings.empty());
}

TEST_CASE("TensorBoard, relaunch from an older checkpoint: later launch wins, overlap redone",
          "[analytics]") {
  const auto want = expected()["tb_older_ckpt"];
  auto s = load_lr_series(Env::posix(), fixture("logs/tb_older_ckpt"), "auto");
  REQUIRE(s.is_ok());
  CHECK(s->restarts == tail(steps_of(want["launch_starts"])));
  REQUIRE(s->redone.size() == 1);
  CHECK(s->redone[0].launch == 1);
  CHECK(s->redone[0].first == want["redone_first"].get<int64_t>());
  CHECK(s->redone[0].last == want["redone_last"].get<int64_t>());
  CHECK(s->redone[0].points == want["redone_points"].get<int64_t>());
  // One point per step, ascending (the redone steps appear once).
  for (size_t i = 1; i < s->points.size(); ++i) CHECK(s->points[i - 1].step < s->points[i].step);
  CHECK(analyze_lr(*s, {}).discontinuities.empty());
}

TEST_CASE("Lightning, two param groups: one series each, from metrics.csv and the event file",
          "[analytics]") {
  const auto want = expected()["lightning"];
  for (const char* where : {"logs/lightning/csv/version_0/metrics.csv", "logs/lightning/tb"}) {
    CAPTURE(where);
    auto all = load_lr_log(Env::posix(), fixture(where), "auto", "");
    REQUIRE(all.is_ok());
    REQUIRE(all->size() == 2);
    CHECK((*all)[0].tag == want["tags"][0].get<std::string>());
    CHECK((*all)[1].tag == want["tags"][1].get<std::string>());
    REQUIRE((*all)[0].points.size() == want["steps"].get<size_t>());
    REQUIRE((*all)[1].points.size() == (*all)[0].points.size());
    const double ratio = want["base_lrs"][0].get<double>() / want["base_lrs"][1].get<double>();
    for (size_t i = 0; i < (*all)[0].points.size(); ++i) {
      CHECK((*all)[0].points[i].lr == Approx(ratio * (*all)[1].points[i].lr).epsilon(1e-5));
    }
    for (const auto& s : *all) CHECK(analyze_lr(s, {}).discontinuities.empty());
  }
  auto only = load_lr_log(Env::posix(), fixture("logs/lightning/tb"), "auto", "lr-AdamW/pg2");
  REQUIRE(only.is_ok());
  REQUIRE(only->size() == 1);
  CHECK(only->front().tag == "lr-AdamW/pg2");
  auto absent = load_lr_log(Env::posix(), fixture("logs/lightning/tb"), "auto", "lr-SGD");
  REQUIRE_FALSE(absent.is_ok());
  CHECK(absent.status().code() == Code::kInvalidArgument);
  CHECK(absent.status().message().find("lr-AdamW/pg1") != std::string::npos);
}

TEST_CASE("Lightning resumed from a checkpoint: one metrics.csv per version is one launch",
          "[analytics]") {
  const auto want = expected()["lightning_resumed"];
  auto all = load_lr_log(Env::posix(), fixture("logs/lightning_resumed"), "auto", "");
  REQUIRE(all.is_ok());
  REQUIRE(all->size() == 2);
  for (const auto& s : *all) {
    CHECK(s.format == "csv");
    CHECK(s.launches.size() == 2);
    CHECK(s.restarts == tail(steps_of(want["launch_starts"])));
    CHECK(s.redone.empty());
    CHECK(s.points.back().step == want["global_step"].get<int64_t>() - 1);
    CHECK(analyze_lr(s, {}).discontinuities.empty());
  }
}

TEST_CASE("MLflow run relaunched into itself: the restart inferred from the wall-time gap",
          "[analytics]") {
  const auto want = expected()["mlruns"];
  const std::string run = fixture("logs/mlruns/" + want["run_dir"].get<std::string>());
  auto s = load_lr_series(Env::posix(), run, "auto");
  REQUIRE(s.is_ok());
  CHECK(s->format == "mlflow");
  CHECK(s->restarts.empty());
  CHECK(s->inferred_restarts == std::vector<int64_t>{want["gap_restart"].get<int64_t>()});
  const LrAnalysis a = analyze_lr(*s, {});
  REQUIRE(a.discontinuities.size() == 1);
  CHECK(a.discontinuities[0].restart_inferred);
  CHECK(a.discontinuities[0].kind == JumpKind::kRestartedWarmup);
  // Told the restarts, nothing is inferred; the jump is still found.
  LrOptions told;
  told.restarts = {want["gap_restart"].get<int64_t>()};
  told.use_inferred_restarts = false;
  const LrAnalysis b = analyze_lr(*s, told);
  CHECK(b.inferred_restarts.empty());
  REQUIRE(b.discontinuities.size() == 1);
  CHECK_FALSE(b.discontinuities[0].restart_inferred);
  // The metric file alone is recognised by its content.
  auto file = load_lr_series(Env::posix(), run + "/metrics/learning_rate", "auto");
  REQUIRE(file.is_ok());
  REQUIRE(file->points.size() == s->points.size());
  for (size_t i = 0; i < s->points.size(); ++i) {
    CHECK(file->points[i].step == s->points[i].step);
    CHECK(file->points[i].lr == s->points[i].lr);
  }
}

TEST_CASE("ckpt lr JSON on event files: top-level keys of the first series plus \"series\"",
          "[analytics]") {
  std::ostringstream out, err;
  LrCommandOptions o;
  o.input = fixture("logs/lightning/tb");
  o.json = true;
  CHECK(run_lr_command(o, Env::posix(), out, err) == 0);
  const auto j = nlohmann::json::parse(out.str());
  for (const char* key : {"source", "format", "points", "restarts", "schedule_known",
                          "discontinuities", "restart_checks", "series"}) {
    CHECK(j.contains(key));
  }
  REQUIRE(j["series"].size() == 2);
  CHECK(j["series"][1]["tag"] == "lr-AdamW/pg2");
  CHECK(j["tag"] == j["series"][0]["tag"]);
  CHECK(j["points"] == j["series"][0]["points"]);

  out.str("");
  o.input = fixture("logs/tb_sched_lost");
  CHECK(run_lr_command(o, Env::posix(), out, err) == 2);
  const auto k = nlohmann::json::parse(out.str());
  CHECK(k["restarts"] == nlohmann::json::array({100, 200}));
  CHECK(k["discontinuities"][0]["at_restart"] == true);
  CHECK(k["warnings"].size() == 1);
  CHECK(err.str().find("warning") != std::string::npos);

  err.str("");
  o.tag = "no/such/tag";
  CHECK(run_lr_command(o, Env::posix(), out, err) == 64);
  CHECK(err.str().find("train/learning_rate") != std::string::npos);
}

TEST_CASE("LR tags found without being told", "[analytics]") {
  for (const char* yes : {"lr", "learning_rate", "train/learning_rate", "lr-AdamW", "lr-AdamW/pg1",
                          "optim/lr/group0", "LR", "lr_0"}) {
    CAPTURE(yes);
    CHECK(is_lr_tag(yes));
  }
  for (const char* no : {"loss", "train/loss", "lr_scheduler_state", "learning_rate_x",
                         "lr/histogram", "grad_norm"}) {
    CAPTURE(no);
    CHECK_FALSE(is_lr_tag(no));
  }
  CHECK(lr_tag_order("lr-AdamW/pg2", "lr-AdamW/pg10"));
  CHECK(lr_tag_order("lr", "learning_rate"));
}

TEST_CASE("CRC-32C and TFRecord framing: known answers, torn tails, flipped bytes", "[analytics]") {
  CHECK(tb::crc32c("123456789") == 0xe3069283u);  // the CRC-32C check value
  // Every prefix of a real event file is either whole records (maybe with a torn tail) or
  // reported: never a crash, and the records before the cut are used.
  auto files = load_lr_log(Env::posix(), fixture("logs/tb_sched_kept"), "tensorboard", "");
  REQUIRE(files.is_ok());
  const std::string path = files->front().launches[0].source;
  auto file = read_text_file(Env::posix(), path);
  REQUIRE(file.is_ok());
  auto whole = tb::parse_event_file(*file, path);
  REQUIRE(whole.is_ok());
  CHECK(whole->torn.empty());
  auto framed = tb::split_tfrecords(*file, path);
  REQUIRE(framed.is_ok());
  std::vector<size_t> boundaries{0};
  for (auto r : framed->records) {
    boundaries.push_back(static_cast<size_t>(r.data() - file->data()) + r.size() + 4);
  }
  size_t last_scalars = 0;
  for (size_t cut = 0; cut <= file->size(); ++cut) {
    auto part = tb::parse_event_file(std::string_view(*file).substr(0, cut), path);
    REQUIRE(part.is_ok());
    const bool boundary = std::find(boundaries.begin(), boundaries.end(), cut) != boundaries.end();
    CHECK(part->torn.empty() == boundary);
    CHECK(part->scalars.size() >= last_scalars);
    last_scalars = part->scalars.size();
  }
  CHECK(last_scalars == whole->scalars.size());
  // A flipped byte inside the file (not in its last record) is corruption, named with the path.
  for (size_t at : {size_t{3}, size_t{20}, file->size() / 2}) {
    std::string bad = *file;
    bad[at] = static_cast<char>(bad[at] ^ 0x40);
    auto r = tb::parse_event_file(bad, path);
    REQUIRE_FALSE(r.is_ok());
    CHECK(r.status().code() == Code::kCorrupt);
    CHECK(r.status().message().find(path) != std::string::npos);
  }
}

TEST_CASE("ckpt lr: non-regular inputs and binary bytes give one escaped line, exit 65",
          "[analytics]") {
  ScratchDir dir;
  std::ostringstream out, err;
  LrCommandOptions o;
  o.input = "/dev/zero";
  CHECK(run_lr_command(o, Env::posix(), out, err) == 65);
  CHECK(err.str() == "ckpt lr: /dev/zero: not a regular file\n");

  const std::string fifo = dir.path() + "/fifo";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  err.str("");
  o.input = fifo;
  CHECK(run_lr_command(o, Env::posix(), out, err) == 65);  // and it did not block
  CHECK(err.str().find("not a regular file") != std::string::npos);

  err.str("");
  o.input = dir.file("binary.csv", std::string("st\x01\xff\xfe"
                                               "ep,\x80\x1b[31m\n0,1\n",
                                               17));
  CHECK(run_lr_command(o, Env::posix(), out, err) == 65);
  const std::string m = err.str();
  CHECK(std::count(m.begin(), m.end(), '\n') == 1);
  for (char c : m.substr(0, m.size() - 1)) {
    CHECK(static_cast<unsigned char>(c) >= 0x20);
    CHECK(static_cast<unsigned char>(c) < 0x7f);
  }
  CHECK(m.find("\\xff") != std::string::npos);
}

// TFRecord-framed Events with one simple_value each, encoded byte by byte (the bench's
// generator) so the test can put hostile names in them.
using pathological::tb_event_record;

TEST_CASE("event files with invalid UTF-8 tags and a step rewind: JSON escapes, never throws",
          "[analytics]") {
  ScratchDir dir;
  std::string file;
  for (int64_t step = 0; step < 20; ++step) {
    file += tb_event_record("\xff\xfe/lr", step, 0.1f, 1000.0 + step);
  }
  for (int64_t step = 10; step < 30; ++step) {  // relaunched into the same file from step 10
    file += tb_event_record("\xff\xfe/lr", step, step < 15 ? 0.01f : 0.1f, 2000.0 + step);
  }
  const std::string path = dir.file("events.bin", file);
  auto s = load_lr_series(Env::posix(), path, "auto");
  REQUIRE(s.is_ok());
  CHECK(s->restarts == std::vector<int64_t>{10});
  REQUIRE(s->redone.size() == 1);
  CHECK(s->redone[0].points == 10);
  CHECK(s->points.size() == 30);
  std::ostringstream out, err;
  LrCommandOptions o;
  o.input = path;
  o.json = true;
  CHECK(run_lr_command(o, Env::posix(), out, err) ==
        2);  // the rewind lands at 0.01: a jump at the restart
  const auto j = nlohmann::json::parse(out.str());
  CHECK(j["tag"] == "\\xff\\xfe/lr");  // the bytes as text, as ckpt::json_text writes them
  o.json = false;
  out.str("");
  CHECK(run_lr_command(o, Env::posix(), out, err) == 2);
  CHECK(out.str().find("\\xff\\xfe/lr") != std::string::npos);
}

TEST_CASE("coverage: invalid run-spec values and non-regular run specs are 65", "[analytics]") {
  ScratchDir dir;
  std::ostringstream out, err;
  cli::CoverageCommandOptions o;
  for (const char* bad :
       {"\"batch_size\": 0, \"world_size\": 1", "\"batch_size\": 2, \"world_size\": 0",
        "\"batch_size\": 2, \"grad_accum\": 0"}) {
    CAPTURE(bad);
    o.run_spec = dir.file("bad.json", std::string("{\"dataset_size\": 10, ") + bad +
                                          ", \"sampler\": {\"kind\": \"ckpt\"}, \"segments\": "
                                          "[{\"start_step\": 0, \"end_step\": 3}]}");
    err.str("");
    CHECK(cli::run_coverage_command(o, Env::posix(), out, err) == 65);
    CHECK(err.str().find("bad.json") != std::string::npos);
  }
  o.run_spec = "/dev/zero";
  err.str("");
  CHECK(cli::run_coverage_command(o, Env::posix(), out, err) == 65);
  CHECK(err.str() == "ckpt coverage: /dev/zero: not a regular file\n");
}

}  // namespace
}  // namespace ckpt::analytics::lr_logs_test
