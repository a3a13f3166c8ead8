#include "eval/svg_plot.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

namespace oscar {
namespace {

constexpr const char* kPalette[] = {"#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f",
                                    "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac"};

std::string escape(const std::string& text) {
  std::string out;
  for (const char c : text) {
    if (c == '<')
      out += "&lt;";
    else if (c == '>')
      out += "&gt;";
    else if (c == '&')
      out += "&amp;";
    else
      out += c;
  }
  return out;
}

std::string text_at(double x, double y, const std::string& text, const char* anchor = "middle",
                    int size = 12, const char* extra = "") {
  return fmt::format(
      "<text x=\"{:.1f}\" y=\"{:.1f}\" font-size=\"{}\" text-anchor=\"{}\" {}>{}</text>\n", x, y,
      size, anchor, extra, escape(text));
}

// Red (0) through yellow to green (1).
std::string accuracy_colour(double v) {
  v = std::clamp(v, 0.0, 1.0);
  const int red = v < 0.5 ? 215 : int(215 - (v - 0.5) * 2 * 160);
  const int green = v < 0.5 ? int(48 + v * 2 * 150) : 198;
  return fmt::format("rgb({},{},{})", red, green, 60);
}

}  // namespace

std::string heat_map_svg(const HeatMap& m) {
  const double cell = 56, left = 90, top = 50;
  const double width = left + cell * double(m.column_labels.size()) + 30;
  const double height = top + cell * double(m.row_labels.size()) + 60;
  std::string svg = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{:.0f}\" height=\"{:.0f}\" "
      "font-family=\"sans-serif\">\n"
      "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n",
      width, height);
  svg += text_at(width / 2, 22, m.title, "middle", 14, "font-weight=\"bold\"");
  for (size_t r = 0; r < m.row_labels.size(); ++r) {
    const double y = top + cell * double(r);
    svg += text_at(left - 8, y + cell / 2 + 4, m.row_labels[r], "end");
    for (size_t c = 0; c < m.column_labels.size(); ++c) {
      const double x = left + cell * double(c);
      const double v = m.values[r][c];
      svg += fmt::format(
          "<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\" fill=\"{}\" "
          "stroke=\"white\"/>\n",
          x, y, cell, cell, accuracy_colour(v));
      svg += text_at(x + cell / 2, y + cell / 2 + 4, fmt::format("{:.2f}", v));
    }
  }
  for (size_t c = 0; c < m.column_labels.size(); ++c) {
    svg += text_at(left + cell * (double(c) + 0.5), top + cell * double(m.row_labels.size()) + 18,
                   m.column_labels[c]);
  }
  svg += text_at(left + cell * double(m.column_labels.size()) / 2, height - 12, m.column_axis);
  svg += text_at(14, top + cell * double(m.row_labels.size()) / 2, m.row_axis, "middle", 12,
                 fmt::format("transform=\"rotate(-90 14 {:.1f})\"",
                             top + cell * double(m.row_labels.size()) / 2)
                     .c_str());
  return svg + "</svg>\n";
}

std::string grouped_bars_svg(const GroupedBars& b) {
  const double left = 70, top = 40, plot_height = 260, bar = 12, gap = 14;
  const double group_width = bar * double(b.series.size()) + gap;
  const double width = left + group_width * double(b.groups.size()) + 170;
  const double height = top + plot_height + 60;
  double max_value = 0, min_value = 1e300;
  for (const auto& row : b.values)
    for (const double v : row) {
      max_value = std::max(max_value, v);
      if (v > 0) min_value = std::min(min_value, v);
    }
  if (max_value <= 0) max_value = 1;
  const double log_low = std::floor(std::log10(std::max(min_value, 1e-12)));
  const double log_high = std::ceil(std::log10(max_value));
  auto scale = [&](double v) {
    if (!b.log_scale) return plot_height * v / max_value;
    const double clamped = std::max(v, std::pow(10.0, log_low));
    return plot_height * (std::log10(clamped) - log_low) / std::max(1.0, log_high - log_low);
  };
  std::string svg = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{:.0f}\" height=\"{:.0f}\" "
      "font-family=\"sans-serif\">\n"
      "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n",
      width, height);
  svg += text_at(width / 2, 22, b.title, "middle", 14, "font-weight=\"bold\"");
  const double base = top + plot_height;
  svg += fmt::format("<line x1=\"{0}\" y1=\"{1}\" x2=\"{0}\" y2=\"{2}\" stroke=\"black\"/>\n", left,
                     top, base);
  svg += fmt::format("<line x1=\"{0}\" y1=\"{1}\" x2=\"{2}\" y2=\"{1}\" stroke=\"black\"/>\n", left,
                     base, left + group_width * double(b.groups.size()));
  const int ticks = b.log_scale ? int(log_high - log_low) : 4;
  for (int t = 0; t <= ticks; ++t) {
    const double value = b.log_scale ? std::pow(10.0, log_low + t) : max_value * t / ticks;
    const double y = base - scale(value);
    svg += fmt::format("<line x1=\"{}\" y1=\"{:.1f}\" x2=\"{}\" y2=\"{:.1f}\" stroke=\"#ddd\"/>\n",
                       left, y, left + group_width * double(b.groups.size()), y);
    svg +=
        text_at(left - 6, y + 4,
                b.log_scale ? fmt::format("{:g}", value) : fmt::format("{:.3g}", value), "end", 10);
  }
  for (size_t g = 0; g < b.groups.size(); ++g) {
    const double x0 = left + gap / 2 + group_width * double(g);
    for (size_t s = 0; s < b.series.size(); ++s) {
      const double h = scale(b.values[s][g]);
      svg += fmt::format(
          "<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{}\" height=\"{:.1f}\" fill=\"{}\"/>\n",
          x0 + bar * double(s), base - h, bar, h, kPalette[s % 10]);
    }
    svg += text_at(x0 + bar * double(b.series.size()) / 2, base + 16, b.groups[g], "middle", 11);
  }
  for (size_t s = 0; s < b.series.size(); ++s) {
    const double y = top + 18 * double(s);
    const double x = left + group_width * double(b.groups.size()) + 14;
    svg += fmt::format("<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"12\" height=\"12\" fill=\"{}\"/>\n",
                       x, y, kPalette[s % 10]);
    svg += text_at(x + 18, y + 10, b.series[s], "start", 11);
  }
  svg += text_at(16, top + plot_height / 2, b.value_axis, "middle", 12,
                 fmt::format("transform=\"rotate(-90 16 {:.1f})\"", top + plot_height / 2).c_str());
  return svg + "</svg>\n";
}

}  // namespace oscar
