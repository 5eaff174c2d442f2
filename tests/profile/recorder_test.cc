// The recorder round trip: phases timed on the training thread, written by the background thread,
// read back by the same loader `ckpt profile analyze` uses.
#include "profile/recorder/recorder.h"

#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "profile/import/trace_import.h"
#include "profile/recorder/recorder_file.h"

namespace ckpt::profile::recorder_test {
namespace {

namespace fs = std::filesystem;

void busy_for(std::chrono::microseconds d) {
  auto until = std::chrono::steady_clock::now() + d;
  while (std::chrono::steady_clock::now() < until) {
  }
}

TEST_CASE("recorder round trip: phases, nesting, counters, sampler, end marker", "[profile]") {
  fs::path path = fs::temp_directory_path() / "ckpt_profile_rank00001.jsonl";
  {
    RecorderOptions o;
    o.path = path.string();
    o.rank = 1;
    o.world_size = 2;
    o.first_step = 100;
    o.sample_period = std::chrono::milliseconds(20);
    auto rec = StepRecorder::open(std::move(o));
    REQUIRE(rec.is_ok());
    auto& r = **rec;
    for (int i = 0; i < 5; ++i) {
      {
        auto s = r.phase(Phase::kDataWait);
        busy_for(std::chrono::microseconds(3000));
      }
      {
        auto f = r.phase(Phase::kForward);
        busy_for(std::chrono::microseconds(1000));
        {
          auto h = r.phase(Phase::kH2D);  // nested: pauses forward
          r.note_h2d_copy(i % 2 == 0);
          busy_for(std::chrono::microseconds(1000));
        }
      }
      r.end_step(32, 1000 + i);
    }
    REQUIRE(r.flush().is_ok());
    std::this_thread::sleep_for(std::chrono::milliseconds(60));  // let the sampler write
    REQUIRE(r.close().is_ok());
    REQUIRE(r.close().is_ok());  // idempotent
  }
  auto traces = load_traces({path.string()});
  REQUIRE(traces.is_ok());
  const RankTrace& t = traces->at(0);
  REQUIRE(t.format == "ckpt-profile");
  REQUIRE(t.rank == 1);
  REQUIRE(t.world_size == 2);
  REQUIRE(t.clean_end);
  REQUIRE(t.steps.size() == 5);
  REQUIRE(t.steps[0].step == 100);
  REQUIRE(t.steps[4].tokens == 1004);
  int pinned = 0, pageable = 0;
  for (const auto& s : t.steps) {
    REQUIRE(s.samples == 32);
    REQUIRE(s.phase_s[index(Phase::kDataWait)] >= 0.003);
    REQUIRE(s.phase_s[index(Phase::kForward)] >= 0.001);
    // Nesting: the h2d inside forward is counted once, so the phases never exceed the step.
    double sum = 0;
    for (double p : s.phase_s) sum += p;
    REQUIRE(sum <= s.duration_s + 1e-9);
    REQUIRE(s.phase_s[index(Phase::kH2D)] >= 0.001);
    REQUIRE(s.duration_s >= 0.005);
    pinned += s.pinned_h2d;
    pageable += s.pageable_h2d;
  }
  REQUIRE(pinned == 3);
  REQUIRE(pageable == 2);
  REQUIRE_FALSE(t.cpu.empty());
  for (const auto& c : t.cpu) {
    REQUIRE(c.host_busy >= 0);
    REQUIRE(c.host_busy <= 1.0);
  }
  fs::remove(path);
}

TEST_CASE("recorder file: torn last line kept, bad lines rejected with file and line",
          "[profile]") {
  std::string text = encode_header(0, 1, 4, 0);
  StepRecord r;
  r.step = 7;
  r.duration_s = 0.5;
  r.phase_s[index(Phase::kCollective)] = 0.25;
  append_step_line(text, r);
  auto ok = decode_recorder_text(text + "{\"s\":8,\"t\":0.", "r.jsonl");
  REQUIRE(ok.is_ok());
  REQUIRE(ok->steps.size() == 1);
  REQUIRE(ok->steps[0].phase_s[index(Phase::kCollective)] == 0.25);
  REQUIRE_FALSE(ok->clean_end);
  auto bad = decode_recorder_text(text + "{\"s\":8}\n" + "{\"end\":1}\n", "r.jsonl");
  REQUIRE(bad.status().code() == Code::kCorrupt);
  REQUIRE(bad.status().message().find("r.jsonl:3:") == 0);
  auto rank = decode_recorder_text(encode_header(3, 2, 4, 0), "r.jsonl");
  REQUIRE(rank.status().code() == Code::kCorrupt);
  RecorderOptions bad_path;
  bad_path.path = "/nonexistent-dir/x.jsonl";
  REQUIRE(StepRecorder::open(std::move(bad_path)).status().code() == Code::kIoError);
}

}  // namespace
}  // namespace ckpt::profile::recorder_test
