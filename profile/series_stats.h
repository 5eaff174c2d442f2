// Statistics over step series: percentiles, robust spread, correlation, and the periodic-spike
// detector the analyzer's "shape" check uses.
//
// Periodicity: a step is a spike when it exceeds its local baseline (the median of the 8 steps
// around it, so slow drifts and level shifts are not spikes) by more than both a floor given by the
// caller and 4 robust standard deviations of the residuals. The series is periodic when there are
// at least 3 spikes, most gaps between consecutive spikes equal one period K (or a multiple of it,
// for a missed spike), and most of the K-spaced positions between the first and last spike hold a
// spike. Spikes give the period in steps directly and make the "every K steps" attribution
// possible; it is O(n), so 10^6 steps cost milliseconds. Pure functions; thread-safe.
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
  double coverage = 0;         // spikes found / K-spaced positions between first and last
};

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

}  // namespace ckpt::profile
