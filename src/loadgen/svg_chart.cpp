#include "loadgen/svg_chart.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

namespace nexus::loadgen {

namespace {

constexpr double kPanelW = 360, kPanelH = 280, kLeft = 60, kRight = 16, kTop = 40, kBottom = 56;
constexpr const char* kColors[3] = {"#1f77b4", "#ff7f0e", "#d62728"};  // p50, p90, p99
constexpr const char* kNames[3] = {"p50", "p90", "p99"};

std::string esc(const std::string& s) {
  std::string o;
  for (char c : s) {
    switch (c) {
      case '&': o += "&amp;"; break;
      case '<': o += "&lt;"; break;
      case '>': o += "&gt;"; break;
      case '"': o += "&quot;"; break;
      default: o += c;
    }
  }
  return o;
}

// The x tick of a phase: its concurrency or rate.
std::string level(const PhaseReport& p) {
  return p.rate > 0 ? fmt::format("{:g}", p.rate) : std::to_string(p.concurrency);
}

std::string tick_label(double v) { return v >= 100 || v == std::floor(v) ? fmt::format("{:.0f}", v) : fmt::format("{:g}", v); }

void panel(std::string& out, const BenchReport& r, const char* title, Summary PhaseReport::*metric, double x0) {
  const size_t n = r.phases.size();
  double top = 0;
  for (const PhaseReport& p : r.phases) top = std::max(top, (p.*metric).p99);
  if (!(top > 0)) top = 1;
  const double step = nice_tick_step(top * 1.05, 6);
  top = std::ceil(top * 1.05 / step) * step;
  const double pw = kPanelW - kLeft - kRight, ph = kPanelH - kTop - kBottom;
  const double left = x0 + kLeft, bottom = kTop + ph;
  auto xpos = [&](size_t i) { return left + (n == 1 ? pw / 2 : pw * static_cast<double>(i) / static_cast<double>(n - 1)); };
  auto ypos = [&](double v) { return bottom - ph * v / top; };

  out += fmt::format("<text x=\"{:.1f}\" y=\"24\" text-anchor=\"middle\" font-weight=\"bold\">{} (ms)</text>\n",
                     left + pw / 2, title);
  for (double v = 0; v <= top + step / 2; v += step) {
    out += fmt::format("<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"#ddd\"/>\n", left,
                       ypos(v), left + pw, ypos(v));
    out += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"end\" font-size=\"11\">{}</text>\n", left - 6,
                       ypos(v) + 4, tick_label(v));
  }
  out += fmt::format("<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\" fill=\"none\" stroke=\"#444\"/>\n",
                     left, static_cast<double>(kTop), pw, ph);
  for (size_t i = 0; i < n; ++i) {
    out += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\" font-size=\"11\">{}</text>\n", xpos(i),
                       bottom + 16, esc(level(r.phases[i])));
  }
  for (int q = 0; q < 3; ++q) {
    std::string pts;
    for (size_t i = 0; i < n; ++i) {
      const Summary& s = r.phases[i].*metric;
      const double v = q == 0 ? s.p50 : q == 1 ? s.p90 : s.p99;
      pts += fmt::format("{}{:.1f},{:.1f}", pts.empty() ? "" : " ", xpos(i), ypos(v));
      out += fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"3\" fill=\"{}\"><title>{} {} {:.2f} ms</title></circle>\n",
                         xpos(i), ypos(v), kColors[q], esc(r.phases[i].label), kNames[q], v);
    }
    out += fmt::format("<polyline points=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"2\"/>\n", pts, kColors[q]);
  }
}

}  // namespace

double nice_tick_step(double top, int max_ticks) {
  const double raw = top / std::max(1, max_ticks);
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    if (m * mag >= raw) return m * mag;
  }
  return 10 * mag;
}

std::string sweep_svg(const BenchReport& r) {
  const double width = 3 * kPanelW, height = kPanelH + 30;
  const bool open = !r.phases.empty() && r.phases.front().rate > 0;
  std::string out = fmt::format(
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0:.0f}\" height=\"{1:.0f}\" viewBox=\"0 0 {0:.0f} {1:.0f}\" "
      "font-family=\"sans-serif\" font-size=\"13\">\n"
      "<title>nexus bench: latency against load</title>\n"
      "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n",
      width, height);
  panel(out, r, "TTFT", &PhaseReport::ttft_ms, 0);
  panel(out, r, "ITL", &PhaseReport::itl_ms, kPanelW);
  panel(out, r, "E2E", &PhaseReport::e2e_ms, 2 * kPanelW);
  out += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">{}</text>\n", width / 2,
                     kPanelH - 12.0, open ? "load: request rate (requests/s)" : "load: concurrency");
  for (int q = 0; q < 3; ++q) {
    const double x = width / 2 - 90 + 70 * q, y = kPanelH + 14.0;
    out += fmt::format("<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"{}\" stroke-width=\"3\"/>"
                       "<text x=\"{:.1f}\" y=\"{:.1f}\">{}</text>\n",
                       x, y - 4, x + 18, y - 4, kColors[q], x + 22, y, kNames[q]);
  }
  out += "</svg>\n";
  return out;
}

}  // namespace nexus::loadgen
