// Statistics over step series: percentiles, robust spread, correlation, and the periodic-spike
// detector the analyzer's "shape" check uses.
//
// Periodicity: a step is a spike when it exceeds its local baseline (the median of the 8 steps
// around it, so slow drifts and level shifts are not spikes) by more than both a floor given by the
// caller and 4 robust standard deviations of the residuals. The series is periodic when there are
// at least kMinPeriodicSpikes spikes, most gaps between consecutive spikes equal one period K (or
// a multiple of it, for a missed spike), and most of the K-spaced positions of the first spike's
// phase over the whole series hold a spike. Spikes give the period in steps directly and make the
// "every K steps" attribution possible; it is O(n), so 10^6 steps cost milliseconds. Pure
// functions; thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace ckpt::profile {

// q in [0, 1]; linear interpolation between order statistics. 0 for an empty series.
double percentile(std::vector<double> v, double q);
double mean_of(const std::vector<double>& v);
// Median absolute deviation scaled to a normal standard deviation (× 1.4826).
double robust_sigma(const std::vector<double>& v);
// Pearson correlation; 0 when either series is constant or shorter than 3.
double pearson(const std::vector<double>& x, const std::vector<double>& y);

// Median of the `half` values on each side of every position (the position itself excluded).
std::vector<double> rolling_baseline(const std::vector<double>& x, size_t half = 4);

struct Periodicity {
  bool found = false;
  int64_t period_steps = 0;
  double confidence = 0;       // matching gaps × coverage, capped by spike count
  std::vector<size_t> spikes;  // indices into the series (all spikes, periodic or not)
  double mean_excess = 0;      // mean (value − baseline) over the spikes
  double gap_agreement = 0;    // fraction of gaps equal to (a multiple of) the period
  double coverage = 0;         // spikes found / K-spaced positions of their phase in the series
};

// A period needs this many occurrences to be called one.
inline constexpr size_t kMinPeriodicSpikes = 4;

// min_excess: the smallest rise over the local baseline that counts as a spike (absolute units
// of the series), e.g. a quarter of the median step time.
Periodicity detect_periodic_spikes(const std::vector<double>& x, double min_excess);

// Periodic structure the spike detector cannot see because the "spikes" are half the steps (a
// loader that refills every other step: 0, 59, 0, 60 … ms of data wait, where the rolling median
// sits on the high level). Two-level model over the autocorrelation: for each lag K in [2, n/3]
// with autocorrelation ≥ 0.5, the steps are split by phase (i mod K); the phase whose median is
// highest is the stall phase, and the series is periodic with period K when that median exceeds
// the other phases' median by min_excess and ≥ 80 % of the stall-phase steps sit above the
// midpoint of the two levels. The smallest such K wins (multiples of a period also correlate).
// O(n × max_lag); max_lag is capped at 64. `spikes` are the stall-phase steps above the midpoint;
// mean_excess is the high level minus the low level.
Periodicity detect_two_level_period(const std::vector<double>& x, double min_excess);

// Autocorrelation of x at `lag` (0 for a constant series or lag ≥ n).
double autocorrelation(const std::vector<double>& x, size_t lag);

// Any period, not only spikes or two levels: a sawtooth, an alternation (period 2), a stall that
// spreads over several steps. For each K in [2, min(64, n/3)] the series is folded by step number
// mod K (so missing steps keep the phase) and the fold's effect size is estimated as ω² =
// (SSB − (K−1)·MSW) / (SST + MSW), the share of the variance the position in the period explains,
// corrected for the K − 1 degrees of freedom every fold gets by chance. The period is the smallest
// K whose ω² is within 90 % of the best (multiples of a period fold as well). It is significant
// when no more than 1 % of `shuffles` random permutations of the series (fixed seed: the result is
// deterministic) reach that ω² at any K — a max-statistic test, so scanning many K does not
// inflate it. Found when ω² ≥ 0.3, the fold's amplitude (highest − lowest position mean) ≥
// min_amplitude, and p ≤ 0.01. At most the last 2048 values are scanned, the last 1024 permuted,
// and permutations run only when the effect and amplitude pass: O(64 × n) for a flat series.
struct PeriodScan {
  bool found = false;
  int64_t period_steps = 0;
  double strength = 0;       // ω² at the chosen period
  double p_value = 1;        // (1 + permutations reaching it) / (1 + permutations run)
  double amplitude = 0;      // highest − lowest fold position mean, in the series' units
  int shuffles = 0;          // permutations run
  std::vector<size_t> high;  // indices (into x) of the steps at the fold positions above the
                             // midpoint of the highest and lowest position means
};
PeriodScan scan_period(const std::vector<double>& x, const std::vector<int64_t>& step,
                       double min_amplitude, uint64_t seed = 25, int shuffles = 199);

}  // namespace ckpt::profile
