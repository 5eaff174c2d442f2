#include "profile/analyze/series_stats.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <random>

namespace ckpt::profile {

double percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  q = std::clamp(q, 0.0, 1.0);
  double pos = q * double(v.size() - 1);
  size_t lo = static_cast<size_t>(std::floor(pos));
  std::nth_element(v.begin(), v.begin() + lo, v.end());
  double a = v[lo];
  if (lo + 1 >= v.size()) return a;
  double b = *std::min_element(v.begin() + lo + 1, v.end());
  return a + (b - a) * (pos - double(lo));
}

double mean_of(const std::vector<double>& v) {
  if (v.empty()) return 0;
  double s = 0;
  for (double x : v) s += x;
  return s / double(v.size());
}

double robust_sigma(const std::vector<double>& v) {
  if (v.empty()) return 0;
  double med = percentile(v, 0.5);
  std::vector<double> dev(v.size());
  for (size_t i = 0; i < v.size(); ++i) dev[i] = std::fabs(v[i] - med);
  return 1.4826 * percentile(std::move(dev), 0.5);
}

double pearson(const std::vector<double>& x, const std::vector<double>& y) {
  size_t n = std::min(x.size(), y.size());
  if (n < 3) return 0;
  double mx = 0, my = 0;
  for (size_t i = 0; i < n; ++i) {
    mx += x[i];
    my += y[i];
  }
  mx /= double(n);
  my /= double(n);
  double sxy = 0, sxx = 0, syy = 0;
  for (size_t i = 0; i < n; ++i) {
    sxy += (x[i] - mx) * (y[i] - my);
    sxx += (x[i] - mx) * (x[i] - mx);
    syy += (y[i] - my) * (y[i] - my);
  }
  if (sxx <= 0 || syy <= 0) return 0;
  return sxy / std::sqrt(sxx * syy);
}

std::vector<double> rolling_baseline(const std::vector<double>& x, size_t half) {
  std::vector<double> out(x.size());
  std::vector<double> window;
  window.reserve(2 * half);
  for (size_t i = 0; i < x.size(); ++i) {
    window.clear();
    size_t lo = i >= half ? i - half : 0;
    size_t hi = std::min(x.size(), i + half + 1);
    // Near the ends, borrow from the other side so the window keeps its size.
    if (i < half) hi = std::min(x.size(), hi + (half - i));
    if (i + half + 1 > x.size())
      lo = lo >= (i + half + 1 - x.size()) ? lo - (i + half + 1 - x.size()) : 0;
    for (size_t j = lo; j < hi; ++j) {
      if (j != i) window.push_back(x[j]);
    }
    if (window.empty()) {
      out[i] = x[i];
      continue;
    }
    size_t mid = window.size() / 2;
    std::nth_element(window.begin(), window.begin() + mid, window.end());
    out[i] = window[mid];
  }
  return out;
}

Periodicity detect_periodic_spikes(const std::vector<double>& x, double min_excess) {
  Periodicity out;
  if (x.size() < 6) return out;
  std::vector<double> base = rolling_baseline(x);
  std::vector<double> resid(x.size());
  for (size_t i = 0; i < x.size(); ++i) resid[i] = x[i] - base[i];
  double threshold = std::max(min_excess, 4.0 * robust_sigma(resid));
  double excess_sum = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    if (resid[i] > threshold) {
      out.spikes.push_back(i);
      excess_sum += resid[i];
    }
  }
  if (out.spikes.empty()) return out;
  out.mean_excess = excess_sum / double(out.spikes.size());
  if (out.spikes.size() < 3) return out;

  std::map<size_t, size_t> gap_count;
  std::vector<size_t> gaps;
  for (size_t i = 1; i < out.spikes.size(); ++i) {
    size_t g = out.spikes[i] - out.spikes[i - 1];
    gaps.push_back(g);
    ++gap_count[g];
  }
  size_t period = 0, best = 0;
  for (auto [g, c] : gap_count) {
    if (c > best) {
      best = c;
      period = g;
    }
  }
  if (period < 2) return out;  // consecutive slow steps are a slow stretch, not a period
  size_t tol = period / 10;
  size_t agree = 0;
  for (size_t g : gaps) {
    size_t k = (g + period / 2) / period;  // the multiple of the period nearest to g
    if (k >= 1 && (g > k * period ? g - k * period : k * period - g) <= tol * k) ++agree;
  }
  out.gap_agreement = double(agree) / double(gaps.size());
  // Coverage over the whole series, not only between the first and the last spike: a period
  // must recur at every one of its places in the run (the first spike's phase, from step 0 to
  // the end), or three random spikes that happen to fit a period read as one.
  const size_t phase = out.spikes.front() % period;
  const size_t places = (x.size() - 1 - phase) / period + 1;  // whole places: floor is meant
  const double expected = static_cast<double>(places);
  out.coverage = std::min(1.0, double(out.spikes.size()) / expected);
  out.period_steps = static_cast<int64_t>(period);
  // Four occurrences at least: three spikes at random fit some period too often (1 in 20 runs
  // of 30 steps with a 10% chance of a spike per step).
  out.found =
      out.gap_agreement >= 0.75 && out.coverage >= 0.6 && out.spikes.size() >= kMinPeriodicSpikes;
  out.confidence =
      out.gap_agreement * out.coverage * std::min(1.0, double(out.spikes.size()) / 5.0);
  return out;
}

double autocorrelation(const std::vector<double>& x, size_t lag) {
  size_t n = x.size();
  if (lag >= n || n < 3) return 0;
  double m = mean_of(x), var = 0, cov = 0;
  for (double v : x) var += (v - m) * (v - m);
  if (var <= 0) return 0;
  for (size_t i = lag; i < n; ++i) cov += (x[i] - m) * (x[i - lag] - m);
  return cov / var * double(n) / double(n - lag);
}

Periodicity detect_two_level_period(const std::vector<double>& x, double min_excess) {
  Periodicity out;
  size_t n = x.size();
  if (n < 6) return out;
  size_t max_lag = std::min<size_t>(64, n / 3);
  for (size_t k = 2; k <= max_lag; ++k) {
    double acf = autocorrelation(x, k);
    if (acf < 0.5) continue;
    std::vector<std::vector<double>> phase(k);
    for (size_t i = 0; i < n; ++i) phase[i % k].push_back(x[i]);
    size_t hi = 0;
    std::vector<double> med(k);
    for (size_t p = 0; p < k; ++p) {
      med[p] = percentile(phase[p], 0.5);
      if (med[p] > med[hi]) hi = p;
    }
    std::vector<double> low;
    for (size_t i = 0; i < n; ++i) {
      if (i % k != hi) low.push_back(x[i]);
    }
    double low_level = percentile(low, 0.5), high_level = med[hi];
    if (high_level - low_level < min_excess) continue;
    double mid = 0.5 * (high_level + low_level);
    std::vector<size_t> spikes;
    for (size_t i = hi; i < n; i += k) {
      if (x[i] > mid) spikes.push_back(i);
    }
    double coverage = double(spikes.size()) / double(phase[hi].size());
    // The other phases must sit low: a series that is high everywhere but one phase is not a stall.
    size_t low_ok = 0;
    for (double v : low) low_ok += v <= mid;
    double low_share = low.empty() ? 0 : double(low_ok) / double(low.size());
    if (coverage < 0.8 || low_share < 0.8 || spikes.size() < 3) continue;
    out.found = true;
    out.period_steps = static_cast<int64_t>(k);
    out.spikes = std::move(spikes);
    out.mean_excess = high_level - low_level;
    out.gap_agreement = low_share;
    out.coverage = coverage;
    out.confidence = std::min(1.0, acf) * coverage * low_share;
    return out;
  }
  return out;
}

namespace {

// ω² of the fold of x by pos mod k; also the position means when `means` is given.
double fold_effect(const std::vector<double>& x, const std::vector<int64_t>& pos, size_t k,
                   std::vector<double>* means = nullptr) {
  size_t n = x.size();
  std::vector<double> sum(k, 0);
  std::vector<size_t> cnt(k, 0);
  double total = 0, sq = 0;
  for (size_t i = 0; i < n; ++i) {
    size_t p = static_cast<size_t>(((pos[i] % int64_t(k)) + int64_t(k)) % int64_t(k));
    sum[p] += x[i];
    ++cnt[p];
    total += x[i];
    sq += x[i] * x[i];
  }
  double m = total / double(n);
  double sst = sq - double(n) * m * m;
  double ssb = 0;
  size_t groups = 0;
  for (size_t p = 0; p < k; ++p) {
    if (cnt[p] == 0) continue;
    ++groups;
    double mp = sum[p] / double(cnt[p]);
    ssb += double(cnt[p]) * (mp - m) * (mp - m);
  }
  if (means != nullptr) {
    means->assign(k, std::nan(""));
    for (size_t p = 0; p < k; ++p) {
      if (cnt[p]) (*means)[p] = sum[p] / double(cnt[p]);
    }
  }
  if (sst <= 1e-300 || groups < 2 || n <= groups) return 0;
  double msw = std::max(0.0, sst - ssb) / double(n - groups);
  return (ssb - double(groups - 1) * msw) / (sst + msw);
}

double best_effect(const std::vector<double>& x, const std::vector<int64_t>& pos, size_t max_k) {
  double best = 0;
  for (size_t k = 2; k <= max_k; ++k) best = std::max(best, fold_effect(x, pos, k));
  return best;
}

}  // namespace

PeriodScan scan_period(const std::vector<double>& all_x, const std::vector<int64_t>& all_step,
                       double min_amplitude, uint64_t seed, int shuffles) {
  PeriodScan out;
  constexpr size_t kScan = 2048, kPermute = 1024, kMaxPeriod = 64;
  size_t off = all_x.size() > kScan ? all_x.size() - kScan : 0;
  std::vector<double> x(all_x.begin() + static_cast<std::ptrdiff_t>(off), all_x.end());
  std::vector<int64_t> pos(all_step.begin() + static_cast<std::ptrdiff_t>(off), all_step.end());
  size_t n = x.size();
  if (n < 6 || pos.size() != n) return out;
  size_t max_k = std::min(kMaxPeriod, n / 3);
  std::vector<double> effect(max_k + 1, 0);
  double best = 0;
  for (size_t k = 2; k <= max_k; ++k) {
    effect[k] = fold_effect(x, pos, k);
    best = std::max(best, effect[k]);
  }
  if (best <= 0) return out;
  size_t k = 2;
  while (k < max_k && effect[k] < 0.9 * best) ++k;
  std::vector<double> means;
  out.strength = fold_effect(x, pos, k, &means);
  out.period_steps = static_cast<int64_t>(k);
  double hi = -INFINITY, lo = INFINITY;
  for (double m : means) {
    if (std::isnan(m)) continue;
    hi = std::max(hi, m);
    lo = std::min(lo, m);
  }
  out.amplitude = hi - lo;
  double mid = 0.5 * (hi + lo);
  for (size_t i = 0; i < n; ++i) {
    size_t p = static_cast<size_t>(((pos[i] % int64_t(k)) + int64_t(k)) % int64_t(k));
    if (means[p] > mid) out.high.push_back(i + off);
  }
  if (out.strength < 0.3 || out.amplitude < min_amplitude) return out;
  // The permutation test on the last kPermute values: the same scan over every K on shuffled
  // copies. Fisher-Yates with a fixed-seed mt19937_64 (not std::shuffle, whose algorithm the
  // standard leaves open), so every platform gives the same p-value.
  size_t poff = n > kPermute ? n - kPermute : 0;
  std::vector<double> px(x.begin() + static_cast<std::ptrdiff_t>(poff), x.end());
  std::vector<int64_t> ppos(pos.begin() + static_cast<std::ptrdiff_t>(poff), pos.end());
  size_t pmax_k = std::min(kMaxPeriod, px.size() / 3);
  double observed = fold_effect(px, ppos, k);
  std::mt19937_64 rng(seed);
  int reached = 0, run = 0;
  int allowed = static_cast<int>(0.01 * double(shuffles + 1)) - 1;  // more: p > 0.01
  for (; run < shuffles; ++run) {
    for (size_t i = px.size() - 1; i > 0; --i) std::swap(px[i], px[rng() % (i + 1)]);
    if (best_effect(px, ppos, pmax_k) >= observed) ++reached;
    if (reached > allowed) {
      ++run;
      break;
    }
  }
  out.shuffles = run;
  out.p_value = double(1 + reached) / double(1 + run);
  out.found = reached <= allowed && observed >= 0.3;
  return out;
}

}  // namespace ckpt::profile
