#include "analytics/render/svg_canvas.h"

#include <cmath>
#include <cstdio>

#include "ckpt/base/text.h"

namespace ckpt::analytics {

std::vector<double> nice_ticks(double lo, double hi, int target) {
  std::vector<double> ticks;
  if (!(hi > lo) || target < 1 || !std::isfinite(lo) || !std::isfinite(hi)) {
    ticks.push_back(lo);
    return ticks;
  }
  const double raw = (hi - lo) / target;
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  double step = mag;
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    if (m * mag >= raw) {
      step = m * mag;
      break;
    }
  }
  for (double t = std::ceil(lo / step) * step; t <= hi + step * 1e-9; t += step) {
    ticks.push_back(std::abs(t) < step * 1e-9 ? 0.0 : t);
  }
  return ticks;
}

std::string short_number(double v) {
  char buf[32];
  const double a = std::abs(v);
  if (a == 0) return "0";
  if (a >= 1e-3 && a < 1e6) {
    std::snprintf(buf, sizeof buf, "%.6g", v);
  } else {
    std::snprintf(buf, sizeof buf, "%.3g", v);
  }
  return buf;
}

std::string grouped(uint64_t v) {
  std::string digits = std::to_string(v);
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out.push_back(',');
    out.push_back(digits[i]);
  }
  return out;
}

double PlotFrame::px(double x) const {
  const double span = x_hi - x_lo;
  return left + (span > 0 ? (x - x_lo) / span : 0.5) * plot_width();
}

double PlotFrame::py(double y) const {
  const double span = y_hi - y_lo;
  return top + plot_height() - (span > 0 ? (y - y_lo) / span : 0.5) * plot_height();
}

std::string PlotFrame::axes(const std::string& x_title, const std::string& y_title) const {
  char buf[512];
  std::string s = "<g class=\"axes\" font-family=\"sans-serif\" font-size=\"11\" fill=\"#333\">\n";
  for (double t : nice_ticks(x_lo, x_hi, 8)) {
    const double x = px(t);
    std::snprintf(buf, sizeof buf,
                  "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#eee\"/>"
                  "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%s</text>\n",
                  x, top, x, top + plot_height(), x, top + plot_height() + 16,
                  html_escape(short_number(t)).c_str());
    s += buf;
  }
  for (double t : nice_ticks(y_lo, y_hi, 6)) {
    const double y = py(t);
    std::snprintf(buf, sizeof buf,
                  "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#eee\"/>"
                  "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">%s</text>\n",
                  left, y, left + plot_width(), y, left - 6, y + 4,
                  html_escape(short_number(t)).c_str());
    s += buf;
  }
  std::snprintf(buf, sizeof buf,
                "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#333\"/>"
                "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#333\"/>\n",
                left, top + plot_height(), left + plot_width(), top + plot_height(), left, top,
                left, top + plot_height());
  s += buf;
  std::snprintf(buf, sizeof buf,
                "<text class=\"x-title\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" "
                "font-size=\"13\">",
                left + plot_width() / 2, height - 12);
  s += buf + html_escape(x_title) + "</text>\n";
  std::snprintf(buf, sizeof buf,
                "<text class=\"y-title\" x=\"16\" y=\"%.1f\" text-anchor=\"middle\" "
                "font-size=\"13\" transform=\"rotate(-90 16 %.1f)\">",
                top + plot_height() / 2, top + plot_height() / 2);
  s += buf + html_escape(y_title) + "</text>\n";
  s += "</g>\n";
  return s;
}

std::string svg_open(double width, double height, const std::string& title) {
  char buf[256];
  std::snprintf(buf, sizeof buf,
                "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
                "viewBox=\"0 0 %.0f %.0f\" role=\"img\">\n",
                width, height, width, height);
  return std::string(buf) + "<title>" + html_escape(title) + "</title>\n" +
         "<rect width=\"100%\" height=\"100%\" fill=\"#fff\"/>\n";
}

}  // namespace ckpt::analytics
