// The SVG chart of a Report: four panels over the step number — step time, data wait, the
// utilisation curve (GPU busy / step, or the host's share not waiting for data: the sawtooth the
// on-call engineer recognises) and each rank's own time (step start → entering the collective:
// the straggler stands out at a glance) — one polyline per rank (the straggler drawn thicker),
// the verdicts written above.
#include <algorithm>
#include <cstdio>
#include <sstream>

#include "ckpt/base/text.h"
#include "profile/analyze/report_render.h"

namespace ckpt::profile {

namespace {

constexpr double kWidth = 960, kPanelH = 220, kLeft = 70, kRight = 20, kTop = 40;
constexpr size_t kMaxPoints = 1500;
const char* const kColours[] = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd",
                                "#ff7f0e", "#17becf", "#8c564b", "#e377c2"};

enum class Series { kStep, kDataWait, kUtilisation, kOwn };

const std::vector<double>& series_of(const Report::Series& s, Series which) {
  switch (which) {
    case Series::kStep:
      return s.step_s;
    case Series::kDataWait:
      return s.data_wait_s;
    case Series::kUtilisation:
      return s.utilisation;
    case Series::kOwn:
      return s.own_s;
  }
  return s.step_s;
}

// Keeps the maximum of each bucket (the minimum for utilisation) so stalls stay visible when 10^6
// steps become 1500 points.
void downsample(const std::vector<int64_t>& x, const std::vector<double>& y, bool keep_min,
                std::vector<std::pair<double, double>>& out) {
  out.clear();
  size_t n = std::min(x.size(), y.size());
  size_t bucket = std::max<size_t>(1, (n + kMaxPoints - 1) / kMaxPoints);
  for (size_t i = 0; i < n; i += bucket) {
    size_t end = std::min(n, i + bucket), arg = i;
    for (size_t j = i; j < end; ++j) {
      if (keep_min ? y[j] < y[arg] : y[j] > y[arg]) arg = j;
    }
    out.push_back({double(x[arg]), y[arg]});
  }
}

void panel(std::ostringstream& o, const Report& r, double y0, const char* title, Series which,
           int64_t xmin, int64_t xmax, int straggler) {
  bool fraction = which == Series::kUtilisation;
  double ymax = fraction ? 1.0 : 0;
  for (const auto& s : r.series) {
    for (double v : series_of(s, which)) ymax = std::max(ymax, v);
  }
  if (ymax <= 0) ymax = 1e-3;
  double plot_w = kWidth - kLeft - kRight;
  double xspan = std::max<double>(1, double(xmax - xmin));
  char buf[512];
  std::snprintf(buf, sizeof buf,
                "<rect x='%g' y='%g' width='%g' height='%g' fill='none' stroke='#999'/>\n"
                "<text x='%g' y='%g' font-size='12'>%s</text>\n"
                "<text x='%g' y='%g' font-size='10' text-anchor='end'>%.3g %s</text>\n"
                "<text x='%g' y='%g' font-size='10' text-anchor='end'>0</text>\n",
                kLeft, y0, plot_w, kPanelH, kLeft, y0 - 4, title, kLeft - 4, y0 + 10,
                fraction ? ymax * 100 : ymax * 1e3, fraction ? "%" : "ms", kLeft - 4, y0 + kPanelH);
  o << buf;
  std::vector<std::pair<double, double>> pts;
  for (size_t k = 0; k < r.series.size(); ++k) {
    const auto& s = r.series[k];
    if (series_of(s, which).empty()) continue;
    downsample(s.step, series_of(s, which), fraction, pts);
    o << "<polyline fill='none' stroke='" << kColours[k % 8] << "' stroke-width='"
      << (s.rank == straggler ? 2.5 : 1.0) << "' points='";
    for (const auto& [x, y] : pts) {
      std::snprintf(buf, sizeof buf, "%.1f,%.1f ", kLeft + (x - double(xmin)) / xspan * plot_w,
                    y0 + kPanelH - y / ymax * kPanelH);
      o << buf;
    }
    o << "'><title>rank " << s.rank << "</title></polyline>\n";
  }
}

}  // namespace

std::string report_svg(const Report& r) {
  int64_t xmin = 0, xmax = 1;
  bool first = true;
  for (const auto& s : r.series) {
    for (int64_t x : s.step) {
      xmin = first ? x : std::min(xmin, x);
      xmax = first ? x : std::max(xmax, x);
      first = false;
    }
  }
  int straggler = -1;
  for (const auto& v : r.verdicts) {
    if (v.kind == VerdictId::kStraggler && v.rank) straggler = *v.rank;
  }
  double notes_h = 16.0 * double(r.verdicts.size() + 1);
  double height = kTop + notes_h + 4 * kPanelH + 170;
  std::ostringstream o;
  o << "<svg xmlns='http://www.w3.org/2000/svg' width='" << kWidth << "' height='" << height
    << "' font-family='sans-serif'>\n<rect width='100%' height='100%' fill='white'/>\n"
    << "<text x='" << kLeft << "' y='20' font-size='14'>ckpt profile: " << r.ranks << " rank(s), "
    << r.steps << " steps</text>\n";
  double y = kTop;
  for (const auto& v : r.verdicts) {
    o << "<text x='" << kLeft << "' y='" << y << "' font-size='11'>"
      << html_escape(v.id(), Quotes::kDoubleOnly) << ": "
      << html_escape(v.summary, Quotes::kDoubleOnly) << "</text>\n";
    y += 16;
  }
  if (r.verdicts.empty()) {
    o << "<text x='" << kLeft << "' y='" << y << "' font-size='11'>no verdicts</text>\n";
  }
  double p1 = kTop + notes_h + 10;
  panel(o, r, p1, "step time", Series::kStep, xmin, xmax, straggler);
  double p2 = p1 + kPanelH + 40;
  panel(o, r, p2, "data wait", Series::kDataWait, xmin, xmax, straggler);
  p2 += kPanelH + 40;
  std::string util = r.utilisation.source == "gpu_busy"
                         ? "utilisation: GPU busy / step time"
                         : "utilisation: share of the step not waiting for data";
  panel(o, r, p2, util.c_str(), Series::kUtilisation, xmin, xmax, straggler);
  p2 += kPanelH + 40;
  panel(o, r, p2, "own time per rank: step start to entering the collective", Series::kOwn, xmin,
        xmax, straggler);
  o << "<text x='" << kLeft << "' y='" << p2 + kPanelH + 16 << "' font-size='10'>step " << xmin
    << "</text><text x='" << kWidth - kRight << "' y='" << p2 + kPanelH + 16
    << "' font-size='10' text-anchor='end'>step " << xmax << "</text>\n";
  double lx = kLeft;
  for (size_t k = 0; k < r.series.size() && k < 16; ++k) {
    o << "<text x='" << lx << "' y='" << p2 + kPanelH + 34 << "' font-size='10' fill='"
      << kColours[k % 8] << "'>rank " << r.series[k].rank << "</text>\n";
    lx += 60;
  }
  o << "</svg>\n";
  return o.str();
}

}  // namespace ckpt::profile
