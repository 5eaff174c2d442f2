#include "analytics/render/lr_chart.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "analytics/render/svg_canvas.h"

namespace ckpt::analytics {
namespace {

// Beyond this many points, keep per pixel column the first, min, max and last point, which
// draws the same picture (jumps included) with a bounded path.
constexpr size_t kDecimateAbove = 4000;

std::vector<LrPoint> decimate(const std::vector<LrPoint>& p, const PlotFrame& f) {
  if (p.size() <= kDecimateAbove) return p;
  std::vector<LrPoint> out;
  size_t i = 0;
  while (i < p.size()) {
    const long col = std::lround(f.px(double(p[i].step)));
    size_t j = i, lo = i, hi = i;
    while (j < p.size() && std::lround(f.px(double(p[j].step))) == col) {
      if (p[j].lr < p[lo].lr) lo = j;
      if (p[j].lr > p[hi].lr) hi = j;
      ++j;
    }
    std::vector<size_t> keep = {i, lo, hi, j - 1};
    std::sort(keep.begin(), keep.end());
    keep.erase(std::unique(keep.begin(), keep.end()), keep.end());
    for (size_t k : keep) out.push_back(p[k]);
    i = j;
  }
  return out;
}

}  // namespace

std::string lr_chart_svg(const LrSeries& series, const LrAnalysis& analysis) {
  PlotFrame f;
  f.top = 56;
  const auto& p = series.points;
  double lr_max = 0;
  for (const auto& q : p) lr_max = std::max(lr_max, q.lr);
  for (const auto& d : analysis.discontinuities) {
    if (d.expected) lr_max = std::max(lr_max, *d.expected);
  }
  f.x_lo = p.empty() ? 0 : double(p.front().step);
  f.x_hi = p.empty() ? 1 : double(p.back().step);
  if (f.x_hi <= f.x_lo) f.x_hi = f.x_lo + 1;
  f.y_lo = 0;
  f.y_hi = lr_max > 0 ? lr_max * 1.08 : 1;

  std::string title = "Learning rate across restarts: " + series.source;
  std::string s = svg_open(f.width, f.height, title);
  char buf[512];
  s += "<text x=\"" + std::to_string(int(f.left)) +
       "\" y=\"22\" font-family=\"sans-serif\" font-size=\"14\" font-weight=\"bold\">" +
       xml_escape("LR against step — " + std::to_string(analysis.restarts.size()) +
                  " restart(s), " + std::to_string(analysis.discontinuities.size()) +
                  " discontinuit" + (analysis.discontinuities.size() == 1 ? "y" : "ies")) +
       "</text>\n";
  s += f.axes("step", "learning rate");

  if (series.schedule && !p.empty()) {
    s += "<polyline class=\"expected\" fill=\"none\" stroke=\"#888\" stroke-width=\"1.2\" "
         "stroke-dasharray=\"2 3\" points=\"";
    const int samples = 600;
    for (int k = 0; k <= samples; ++k) {
      const double x = f.x_lo + (f.x_hi - f.x_lo) * k / samples;
      const double y = sched::lr_at(*series.schedule, static_cast<int64_t>(std::llround(x)));
      std::snprintf(buf, sizeof buf, "%.1f,%.1f ", f.px(x), f.py(std::min(y, f.y_hi)));
      s += buf;
    }
    s += "\"/>\n";
  }

  for (int64_t r : analysis.restarts) {
    if (double(r) < f.x_lo || double(r) > f.x_hi) continue;
    std::snprintf(buf, sizeof buf,
                  "<g class=\"restart\"><line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" "
                  "stroke=\"#e69500\" stroke-width=\"1.2\" stroke-dasharray=\"6 4\"/>"
                  "<text x=\"%.1f\" y=\"%.1f\" font-family=\"sans-serif\" font-size=\"10\" "
                  "fill=\"#b36b00\">restart %lld</text></g>\n",
                  f.px(double(r)), f.top, f.px(double(r)), f.top + f.plot_height(),
                  f.px(double(r)) + 3, f.top + 10, static_cast<long long>(r));
    s += buf;
  }

  s += "<polyline class=\"lr-series\" fill=\"none\" stroke=\"#1f5fbf\" stroke-width=\"1.6\" "
       "points=\"";
  for (const auto& q : decimate(p, f)) {
    std::snprintf(buf, sizeof buf, "%.1f,%.1f ", f.px(double(q.step)), f.py(q.lr));
    s += buf;
  }
  s += "\"/>\n";

  for (const auto& d : analysis.discontinuities) {
    const double x = f.px(double(d.step));
    std::snprintf(buf, sizeof buf,
                  "<g class=\"discontinuity\"><line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" "
                  "y2=\"%.1f\" stroke=\"#d62728\" stroke-width=\"3\" opacity=\"0.7\"/>"
                  "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"5\" fill=\"none\" stroke=\"#d62728\" "
                  "stroke-width=\"2\"/><text x=\"%.1f\" y=\"%.1f\" font-family=\"sans-serif\" "
                  "font-size=\"10\" fill=\"#d62728\">",
                  x, f.py(d.lr_before), x, f.py(d.lr_after), x, f.py(d.lr_after), x + 7,
                  f.py(d.lr_after) - 6);
    s += buf;
    s += xml_escape(std::string(jump_kind_name(d.kind)) + " @" + std::to_string(d.step)) +
         "</text></g>\n";
  }

  // Legend: one row between the title and the plot, so it never hides the curve.
  const double ly = 36;
  double lx = f.left;
  auto item = [&](const std::string& mark, const char* label) {
    s += "<g class=\"legend\" font-family=\"sans-serif\" font-size=\"11\">" + mark;
    std::snprintf(buf, sizeof buf, "<text x=\"%.1f\" y=\"%.1f\">%s</text></g>\n", lx + 28, ly + 4,
                  label);
    s += buf;
    lx += 40 + 6.2 * double(std::string(label).size());
  };
  std::snprintf(buf, sizeof buf,
                "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#1f5fbf\" "
                "stroke-width=\"2\"/>",
                lx, ly, lx + 22, ly);
  item(buf, "logged LR");
  if (series.schedule) {
    std::snprintf(buf, sizeof buf,
                  "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#888\" "
                  "stroke-dasharray=\"2 3\"/>",
                  lx, ly, lx + 22, ly);
    item(buf, "expected (schedule spec)");
  }
  std::snprintf(buf, sizeof buf,
                "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#e69500\" "
                "stroke-dasharray=\"6 4\"/>",
                lx, ly, lx + 22, ly);
  item(buf, "restart");
  std::snprintf(buf, sizeof buf,
                "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"4\" fill=\"none\" stroke=\"#d62728\" "
                "stroke-width=\"2\"/>",
                lx + 11, ly);
  item(buf, "discontinuity");
  s += "</svg>\n";
  return s;
}

}  // namespace ckpt::analytics
