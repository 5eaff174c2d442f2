// Small building blocks for the hand-written SVG charts of `ckpt lr` and `ckpt coverage` (text
// escaping is ckpt/base/text.h's html_escape): "nice" axis ticks, compact number formatting, and an
// axis frame that maps data coordinates to pixels. The charts are plain SVG 1.1 strings with no
// scripts, fonts or external references, so they embed unchanged in the self-contained HTML report.
//
// Values only; thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ckpt::analytics {

// Escapes &, <, >, " and ' for SVG/HTML text and attributes.
// Up to about `target` round tick values covering [lo, hi] (1, 2, 5 × 10^k steps).
std::vector<double> nice_ticks(double lo, double hi, int target);
// Short human form: 0.0003 → "3e-04", 12000 → "12000", 1.5e9 → "1.5e+09".
std::string short_number(double v);
// Thousands separated: 1234567 → "1,234,567".
std::string grouped(uint64_t v);

// A plot area inside an SVG of width × height with the given margins; maps data to pixels.
struct PlotFrame {
  double width = 900, height = 420;
  double left = 80, right = 24, top = 44, bottom = 56;
  double x_lo = 0, x_hi = 1, y_lo = 0, y_hi = 1;

  double px(double x) const;  // data x → pixel x
  double py(double y) const;  // data y → pixel y (up is larger)
  double plot_width() const { return width - left - right; }
  double plot_height() const { return height - top - bottom; }
  // Axis lines, ticks, tick labels, grid and axis titles as SVG elements.
  std::string axes(const std::string& x_title, const std::string& y_title) const;
};

// "<svg ...>" opening tag with a white background and the given accessible title.
std::string svg_open(double width, double height, const std::string& title);

}  // namespace ckpt::analytics
