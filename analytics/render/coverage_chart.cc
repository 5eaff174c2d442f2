#include "analytics/render/coverage_chart.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "analytics/render/svg_canvas.h"
#include "ckpt/base/text.h"

namespace ckpt::analytics {
namespace {

constexpr double kStripHeight = 22;
constexpr double kStripGap = 12;

// Red (never) to green (visited), through the fraction visited.
std::string strip_color(double visited) {
  const int r0 = 0xd6, g0 = 0x27, b0 = 0x28, r1 = 0x2c, g1 = 0xa0, b1 = 0x2c;
  char buf[16];
  std::snprintf(buf, sizeof buf, "#%02x%02x%02x", int(r0 + (r1 - r0) * visited),
                int(g0 + (g1 - g0) * visited), int(b0 + (b1 - b0) * visited));
  return buf;
}

const char* strip_class(double visited) {
  if (visited >= 1.0) return "visited";
  if (visited <= 0.0) return "never-visited";
  return "partly-visited";
}

// The epochs that have a strip: compute_coverage keeps strips for exactly these
// (CoverageOptions::strip_epochs).
std::vector<const EpochCoverage*> shown_epochs(const CoverageReport& report) {
  std::vector<const EpochCoverage*> shown;
  for (const auto& e : report.epochs) {
    if (!e.strip.empty()) shown.push_back(&e);
  }
  return shown;
}

// The frame: the dataset across, one strip per shown epoch down.
PlotFrame coverage_frame(const CoverageReport& report, size_t strips) {
  PlotFrame f;
  f.left = 96;
  f.right = 120;
  f.top = 48;
  f.bottom = 56;
  f.height = f.top + f.bottom + std::max<size_t>(1, strips) * (kStripHeight + kStripGap);
  f.x_lo = 0;
  f.x_hi = double(report.dataset_size);
  return f;
}

std::string title_text(const PlotFrame& f, const CoverageReport& report) {
  char buf[512];
  std::snprintf(buf, sizeof buf,
                "<text x=\"%.0f\" y=\"22\" font-family=\"sans-serif\" font-size=\"14\" "
                "font-weight=\"bold\">",
                f.left);
  return buf +
         html_escape("Coverage per epoch — " + grouped(report.overall_unique) + " of " +
                     grouped(report.dataset_size) + " samples visited overall (" +
                     short_number(100.0 * report.overall_fraction) + "%)") +
         "</text>\n";
}

// The x axis only (its ticks and title): the y "axis" is the list of epochs.
std::string x_axis(const PlotFrame& f, const std::vector<const EpochCoverage*>& shown) {
  std::string s;
  char buf[512];
  const double axis_y = f.height - f.bottom + 4;
  for (double t : nice_ticks(0, f.x_hi, 8)) {
    std::snprintf(buf, sizeof buf,
                  "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#333\"/>"
                  "<text x=\"%.1f\" y=\"%.1f\" font-family=\"sans-serif\" font-size=\"11\" "
                  "text-anchor=\"middle\">%s</text>\n",
                  f.px(t), axis_y, f.px(t), axis_y + 5, f.px(t), axis_y + 18,
                  html_escape(short_number(t)).c_str());
    s += buf;
  }
  bool any_mixed = false;
  for (const auto* e : shown) any_mixed = any_mixed || !e->single_order;
  std::snprintf(buf, sizeof buf,
                "<text class=\"x-title\" x=\"%.1f\" y=\"%.1f\" font-family=\"sans-serif\" "
                "font-size=\"13\" text-anchor=\"middle\">%s</text>\n",
                f.left + f.plot_width() / 2, f.height - 10,
                any_mixed ? "position in the epoch's order (sample id for mixed-order epochs)"
                          : "position in the epoch's order");
  return s + buf;
}

// The strip's bins, one rectangle per run of bins with the same colour (keeps the SVG small).
std::string strip_rects(const PlotFrame& f, const std::vector<double>& strip, double y) {
  std::string s;
  char buf[512];
  const size_t bins = strip.size();
  size_t k = 0;
  while (k < bins) {
    const std::string color = strip_color(strip[k]);
    size_t j = k + 1;
    while (j < bins && strip_color(strip[j]) == color) ++j;
    const double x0 = f.left + f.plot_width() * double(k) / double(bins);
    const double x1 = f.left + f.plot_width() * double(j) / double(bins);
    std::snprintf(buf, sizeof buf,
                  "<rect class=\"%s\" x=\"%.2f\" y=\"%.1f\" width=\"%.2f\" height=\"%.0f\" "
                  "fill=\"%s\"/>\n",
                  strip_class(strip[k]), x0, y, std::max(0.3, x1 - x0), kStripHeight,
                  color.c_str());
    s += buf;
    k = j;
  }
  return s;
}

// Black ticks where a restarted process took its first step (single-order epochs only: in a
// mixed one positions are not on the strip's axis).
std::string restart_marks(const PlotFrame& f, const EpochCoverage& e, uint64_t dataset_size,
                          double y) {
  std::string s;
  if (!e.single_order) return s;
  char buf[512];
  for (const auto& m : e.restarts) {
    // DistributedSampler's padded positions past N read the head of the order again.
    const double x = f.px(double(m.position % std::max<uint64_t>(1, dataset_size)));
    std::snprintf(buf, sizeof buf,
                  "<line class=\"restart-mark\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" "
                  "y2=\"%.1f\" stroke=\"#000\" stroke-width=\"2\"><title>restart at step "
                  "%lld</title></line>\n",
                  x, y - 4, x, y + kStripHeight + 4, static_cast<long long>(m.step));
    s += buf;
  }
  return s;
}

// One epoch: its label, the strip, the restart marks and the unique fraction at the right.
std::string epoch_strip(const PlotFrame& f, const EpochCoverage& e, uint64_t dataset_size,
                        double y) {
  char buf[512];
  std::snprintf(buf, sizeof buf,
                "<g class=\"epoch-strip\" data-epoch=\"%llu\">"
                "<text x=\"%.1f\" y=\"%.1f\" font-family=\"sans-serif\" font-size=\"12\" "
                "text-anchor=\"end\">epoch %llu</text>\n",
                static_cast<unsigned long long>(e.epoch), f.left - 8, y + kStripHeight / 2 + 4,
                static_cast<unsigned long long>(e.epoch));
  std::string s = buf;
  s += strip_rects(f, e.strip, y);
  s += restart_marks(f, e, dataset_size, y);
  std::snprintf(buf, sizeof buf,
                "<text x=\"%.1f\" y=\"%.1f\" font-family=\"sans-serif\" font-size=\"12\">"
                "%.2f%% · %s rep</text></g>\n",
                f.left + f.plot_width() + 6, y + kStripHeight / 2 + 4, 100.0 * e.fraction,
                html_escape(short_number(double(e.repeats))).c_str());
  return s + buf;
}

}  // namespace

std::string coverage_chart_svg(const CoverageReport& report, const std::string& source) {
  const std::vector<const EpochCoverage*> shown = shown_epochs(report);
  const PlotFrame f = coverage_frame(report, shown.size());
  std::string s = svg_open(f.width, f.height, "Dataset coverage across restarts: " + source);
  s += title_text(f, report);
  s += x_axis(f, shown);
  double y = f.top;
  for (const auto* e : shown) {
    s += epoch_strip(f, *e, report.dataset_size, y);
    y += kStripHeight + kStripGap;
  }
  s += "</svg>\n";
  return s;
}

}  // namespace ckpt::analytics
