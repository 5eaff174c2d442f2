// bench_profile: the step profiler's two performance goals (DESIGN.md, Performance).
//   1. recorder overhead per phase record (goal ≤ 200 ns), against a bare steady_clock read
//      measured in the same run (the floor any timer pays);
//   2. analysis of 10^6 synthetic step records (goal ≤ 2 s), plus writing and re-reading them
//      through the recorder file format.
// Usage: bench_profile [steps]   (default 1000000). Prints figures; asserts nothing.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <random>

#include "profile/analyze/analyzer.h"
#include "profile/import/trace_import.h"
#include "profile/recorder/recorder.h"
#include "profile/recorder/recorder_file.h"

using namespace ckpt::profile;
using Clock = std::chrono::steady_clock;

static double since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

int main(int argc, char** argv) {
  size_t steps = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 1000000;
  namespace fs = std::filesystem;
  fs::path file = fs::temp_directory_path() / "bench_profile_rank00000.jsonl";

  // --- 1. recorder overhead --------------------------------------------------------------------
  constexpr int kPhasesPerStep = 6;
  const size_t rec_steps = 200000;
  int64_t sink = 0;
  auto t0 = Clock::now();
  for (size_t i = 0; i < rec_steps * kPhasesPerStep; ++i) sink += StepRecorder::now_ns() & 1;
  double clock_ns = since(t0) * 1e9 / double(rec_steps * kPhasesPerStep);
  {
    RecorderOptions o;
    o.path = file.string();
    auto rec = StepRecorder::open(std::move(o));
    if (!rec.is_ok()) {
      std::fprintf(stderr, "bench_profile: %s\n", rec.status().message().c_str());
      return 1;
    }
    auto& r = **rec;
    const Phase phases[kPhasesPerStep] = {Phase::kDataWait, Phase::kH2D,        Phase::kForward,
                                          Phase::kBackward, Phase::kCollective, Phase::kOptimizer};
    t0 = Clock::now();
    for (size_t s = 0; s < rec_steps; ++s) {
      for (Phase p : phases) {
        auto scope = r.phase(p);
      }
    }
    double phase_ns = since(t0) * 1e9 / double(rec_steps * kPhasesPerStep);
    t0 = Clock::now();
    for (size_t s = 0; s < rec_steps; ++s) r.end_step(32, 4096);
    double step_ns = since(t0) * 1e9 / double(rec_steps);
    (void)r.close();
    std::printf(
        "recorder: %.1f ns per phase record (scoped begin+end; goal <= 200 ns); "
        "bare steady_clock read %.1f ns (x%.2f); end_step %.1f ns\n",
        phase_ns, clock_ns, phase_ns / clock_ns / 2, step_ns);
  }

  // --- 2. analysis of 10^6 step records ---------------------------------------------------------
  std::mt19937 gen(1);
  std::normal_distribution<double> noise(0, 0.002);
  RankTrace t;
  t.rank = 0;
  t.world_size = 1;
  double now = 0;
  t.steps.reserve(steps);
  for (size_t i = 0; i < steps; ++i) {
    StepRecord s;
    s.step = static_cast<int64_t>(i);
    s.start_s = now;
    s.duration_s = 0.1 + noise(gen) + (i % 500 == 7 ? 0.5 : 0);
    s.phase_s[index(Phase::kDataWait)] = 0.01;
    s.phase_s[index(Phase::kForward)] = 0.03;
    s.phase_s[index(Phase::kBackward)] = 0.05;
    if (i % 500 == 7) s.phase_s[index(Phase::kCheckpoint)] = 0.5;
    s.samples = 32;
    s.tokens = 4096;
    now += s.duration_s;
    t.steps.push_back(s);
  }
  t.end_s = now;
  t0 = Clock::now();
  std::clock_t c0 = std::clock();
  auto rep = analyze({t});
  double analyze_s = since(t0);
  double analyze_cpu_s = double(std::clock() - c0) / CLOCKS_PER_SEC;
  if (!rep.is_ok()) {
    std::fprintf(stderr, "bench_profile: %s\n", rep.status().message().c_str());
    return 1;
  }
  std::printf("analyze: %zu step records in %.3f s wall, %.3f s CPU (goal <= 2 s); verdicts:",
              steps, analyze_s, analyze_cpu_s);
  for (const auto& v : rep->verdicts) std::printf(" %s", v.id().c_str());
  std::printf("\n");

  std::string text = encode_header(0, 1, 1, 0);
  for (const auto& s : t.steps) append_step_line(text, s);
  {
    std::FILE* f = std::fopen(file.c_str(), "w");
    if (f == nullptr) return 1;
    std::fwrite(text.data(), 1, text.size(), f);
    std::fclose(f);
  }
  t0 = Clock::now();
  auto loaded = load_traces({file.string()});
  double load_s = since(t0);
  if (!loaded.is_ok()) {
    std::fprintf(stderr, "bench_profile: %s\n", loaded.status().message().c_str());
    return 1;
  }
  std::printf("load: %zu step lines (%.1f MB recorder file) in %.3f s (%.0f MB/s)\n",
              loaded->at(0).steps.size(), double(text.size()) / 1e6, load_s,
              double(text.size()) / 1e6 / load_s);
  fs::remove(file);
  return sink == -1 ? 1 : 0;
}
