#include "analytics/render/lr_chart.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "analytics/render/svg_canvas.h"
#include "ckpt/base/text.h"

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

// The frame: steps of the series across, 0 up to a little above the highest LR (logged or
// expected at a discontinuity) up.
PlotFrame lr_frame(const LrSeries& series, const LrAnalysis& analysis) {
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
  return f;
}

std::string title_text(const PlotFrame& f, const LrAnalysis& analysis) {
  return "<text x=\"" + std::to_string(int(f.left)) +
         "\" y=\"22\" font-family=\"sans-serif\" font-size=\"14\" font-weight=\"bold\">" +
         html_escape("LR against step — " + std::to_string(analysis.restarts.size()) +
                     " restart(s), " + std::to_string(analysis.discontinuities.size()) +
                     " discontinuit" + (analysis.discontinuities.size() == 1 ? "y" : "ies")) +
         "</text>\n";
}

// The schedule's closed form, dotted, sampled at 601 steps across the frame.
std::string expected_line(const PlotFrame& f, const sched::ScheduleSpec& schedule) {
  std::string s =
      "<polyline class=\"expected\" fill=\"none\" stroke=\"#888\" stroke-width=\"1.2\" "
      "stroke-dasharray=\"2 3\" points=\"";
  char buf[512];
  const int samples = 600;
  for (int k = 0; k <= samples; ++k) {
    const double x = f.x_lo + (f.x_hi - f.x_lo) * k / samples;
    const double y = sched::lr_at(schedule, static_cast<int64_t>(std::llround(x)));
    std::snprintf(buf, sizeof buf, "%.1f,%.1f ", f.px(x), f.py(std::min(y, f.y_hi)));
    s += buf;
  }
  return s + "\"/>\n";
}

// A dashed vertical line and a label at each restart inside the frame.
std::string restart_lines(const PlotFrame& f, const std::vector<int64_t>& restarts) {
  std::string s;
  char buf[512];
  for (int64_t r : restarts) {
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
  return s;
}

std::string series_line(const PlotFrame& f, const std::vector<LrPoint>& points) {
  std::string s =
      "<polyline class=\"lr-series\" fill=\"none\" stroke=\"#1f5fbf\" stroke-width=\"1.6\" "
      "points=\"";
  char buf[512];
  for (const auto& q : decimate(points, f)) {
    std::snprintf(buf, sizeof buf, "%.1f,%.1f ", f.px(double(q.step)), f.py(q.lr));
    s += buf;
  }
  return s + "\"/>\n";
}

// Each discontinuity: a red bar from the LR before to the LR after, a circle on the new level,
// its kind and step as a label.
std::string discontinuity_marks(const PlotFrame& f,
                                const std::vector<Discontinuity>& discontinuities) {
  std::string s;
  char buf[512];
  for (const auto& d : discontinuities) {
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
    s += html_escape(std::string(jump_kind_name(d.kind)) + " @" + std::to_string(d.step)) +
         "</text></g>\n";
  }
  return s;
}

// Legend: one row between the title and the plot, so it never hides the curve.
std::string legend(const PlotFrame& f, bool with_schedule) {
  std::string s;
  char buf[512];
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
  if (with_schedule) {
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
  return s;
}

}  // namespace

std::string lr_chart_svg(const LrSeries& series, const LrAnalysis& analysis) {
  const PlotFrame f = lr_frame(series, analysis);
  std::string s = svg_open(f.width, f.height, "Learning rate across restarts: " + series.source);
  s += title_text(f, analysis);
  s += f.axes("step", "learning rate");
  if (series.schedule && !series.points.empty()) s += expected_line(f, *series.schedule);
  s += restart_lines(f, analysis.restarts);
  s += series_line(f, series.points);
  s += discontinuity_marks(f, analysis.discontinuities);
  s += legend(f, series.schedule.has_value());
  s += "</svg>\n";
  return s;
}

}  // namespace ckpt::analytics
