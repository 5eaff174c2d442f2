// coverage_bench: `ckpt coverage` at the design's scale — 10^9 samples, 200 restarts — timed end
// to end (replay, per-epoch coverage, the first 100000 never-visited ids, JSON-sized output) with
// the peak RSS of the process. Target (DESIGN.md, Performance): <= 5 s and <= 200 MB. A program
// to run by hand or in CI, never a timed test. Usage: coverage_bench [dataset_size]
#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "analytics/coverage/coverage.h"
#include "analytics/coverage/run_spec.h"
#include "analytics/render/coverage_chart.h"

using namespace ckpt::analytics;

namespace {

double peak_rss_mb() {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return double(ru.ru_maxrss) / 1024.0;  // Linux reports KiB
}

struct Scenario {
  const char* name;
  int64_t steps_per_segment;
  int lose_loader_every;  // k: every k-th restart loses the loader position; 0: none does
};

}  // namespace

int main(int argc, char** argv) {
  const uint64_t n = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 1'000'000'000ull;
  const Scenario scenarios[] = {
      // Restarts every 1000 steps, loader position always lost: the head of epoch 0 forever.
      {"frequent restarts, loader lost", 1000, 1},
      // 200 restarts of 30000 steps (an epoch is ~244k steps), every tenth loses the loader.
      {"mixed, several epochs", 30000, 10},
      // Every restart resumes the loader exactly: 24 complete epochs.
      {"loader always resumed", 30000, 0},
  };
  std::printf("coverage_bench: %llu samples, 200 restarts, ckpt order (8 ranks x 512)\n",
              static_cast<unsigned long long>(n));
  int failures = 0;
  for (const auto& sc : scenarios) {
    RunSpec spec;
    spec.sampler.kind = SamplerKind::kCkpt;
    spec.sampler.dataset_size = n;
    spec.sampler.seed = 1234;
    spec.sampler.world_size = 8;
    spec.sampler.batch_size = 512;
    for (int r = 0; r <= 200; ++r) {
      spec.segments.push_back({r * sc.steps_per_segment, (r + 1) * sc.steps_per_segment,
                               sc.lose_loader_every == 0 || r % sc.lose_loader_every != 0});
    }
    const auto t0 = std::chrono::steady_clock::now();
    auto in = replay_run(spec);
    if (!in.is_ok()) {
      std::fprintf(stderr, "replay failed: %s\n", in.status().message().c_str());
      return 1;
    }
    auto report = compute_coverage(*in, CoverageOptions{});
    if (!report.is_ok()) {
      std::fprintf(stderr, "coverage failed: %s\n", report.status().message().c_str());
      return 1;
    }
    const std::string svg = coverage_chart_svg(*report, "bench");
    const double secs =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    uint64_t listed = 0;
    for (const auto& e : report->epochs) listed += e.never_visited_ids.size();
    const double rss = peak_rss_mb();
    std::printf(
        "  %-32s %3zu epochs, overall %.4f%%, %llu never-visited ids listed, svg %zu B: "
        "%.3f s (target 5 s, ratio %.2f), peak RSS %.1f MB (target 200 MB, ratio %.2f)\n",
        sc.name, report->epochs.size(), 100 * report->overall_fraction,
        static_cast<unsigned long long>(listed), svg.size(), secs, secs / 5.0, rss, rss / 200.0);
    if (secs > 5.0 || rss > 200.0) ++failures;
  }
  return failures == 0 ? 0 : 2;
}
