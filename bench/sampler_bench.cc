// Sampler benchmark: the cost of one EpochPermutation::at() against the peer it replaces, a
// materialised permutation (std::iota + std::shuffle with mt19937_64, what a RandomSampler-style
// loader holds in memory), measured in the same run. Prints ns per sample and the ratios; no
// assertions. Usage: sampler_bench [n]   (default 10^7; the O(1) order is also timed at 10^9).
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <random>
#include <vector>

#include "ckpt/loader/epoch_permutation.h"
#include "ckpt/loader/resumable_sampler.h"

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// Sequential walk over the whole epoch; the checksum keeps the compiler from dropping the work.
double time_feistel(uint64_t n, uint64_t count, uint64_t* checksum) {
  ckpt::loader::EpochPermutation p(n, 1234, 5);
  const auto t0 = Clock::now();
  uint64_t sum = 0;
  for (uint64_t i = 0; i < count; ++i) sum += p.at(i);
  const double s = seconds_since(t0);
  *checksum += sum;
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  const uint64_t n = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 10000000;
  uint64_t checksum = 0;

  // Peer: build the permutation (the cost a restart or a new epoch pays), then read it in order.
  auto t0 = Clock::now();
  std::vector<uint64_t> perm(n);
  std::iota(perm.begin(), perm.end(), uint64_t{0});
  std::mt19937_64 rng(1234);
  std::shuffle(perm.begin(), perm.end(), rng);
  const double build_s = seconds_since(t0);
  t0 = Clock::now();
  for (uint64_t v : perm) checksum += v;
  const double read_s = seconds_since(t0);

  const double feistel_s = time_feistel(n, n, &checksum);
  // The same walk through at_range (eight lanes in lockstep), in chunks a caller would use.
  ckpt::loader::EpochPermutation p(n, 1234, 5);
  std::vector<uint64_t> chunk(4096);
  t0 = Clock::now();
  for (uint64_t first = 0; first < n; first += chunk.size()) {
    const size_t m = static_cast<size_t>(std::min<uint64_t>(chunk.size(), n - first));
    p.at_range(first, m, chunk.data());
    for (size_t j = 0; j < m; ++j) checksum += chunk[j];
  }
  const double range_s = seconds_since(t0);

  const uint64_t big = 1000000000;
  const uint64_t big_count = 10000000;
  const double feistel_big_s = time_feistel(big, big_count, &checksum);

  // A whole sampler step at 10^9 samples, 64 ranks x 512: what a training loop calls.
  ckpt::loader::SamplerSpec spec;
  spec.dataset_size = big;
  spec.world_size = 64;
  spec.batch_size = 512;
  ckpt::loader::ResumableSampler sampler(spec, 3);
  t0 = Clock::now();
  const int steps = 2000;
  for (int i = 0; i < steps; ++i) checksum += sampler.next_batch().size();
  const double step_s = seconds_since(t0);

  const double ns = 1e9 / static_cast<double>(n);
  std::printf("n = %llu\n", static_cast<unsigned long long>(n));
  std::printf(
      "materialised shuffle: build %.1f ns/sample (%.2f s, %.0f MiB), read %.2f ns/sample\n",
      build_s * ns, build_s, n * 8.0 / (1 << 20), read_s * ns);
  std::printf(
      "EpochPermutation::at: %.1f ns/sample (n = %llu), %.1f ns/sample (n = 10^9), "
      "O(1) memory\n",
      feistel_s * ns, static_cast<unsigned long long>(n),
      feistel_big_s * 1e9 / static_cast<double>(big_count));
  std::printf("EpochPermutation::at_range: %.1f ns/sample (n = %llu)\n", range_s * ns,
              static_cast<unsigned long long>(n));
  std::printf(
      "ratio at/(build+read) = %.2f   at_range/(build+read) = %.2f   at_range/read = %.1f\n",
      feistel_s / (build_s + read_s), range_s / (build_s + read_s), range_s / read_s);
  std::printf("ResumableSampler::next_batch (N = 10^9, W = 64, B = 512): %.1f us/step\n",
              step_s * 1e6 / steps);
  std::printf("(checksum %llu)\n", static_cast<unsigned long long>(checksum));
  return 0;
}
