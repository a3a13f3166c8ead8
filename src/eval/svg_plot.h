#pragma once
// Small SVG figures for the evaluation reports: a heat map (needle-in-a-haystack accuracy by
// context and depth) and grouped bars (per-layer attention error by method).
#include <string>
#include <vector>

namespace oscar {

struct HeatMap {
  std::string title;
  std::vector<std::string> row_labels;      // top to bottom
  std::vector<std::string> column_labels;   // left to right
  std::vector<std::vector<double>> values;  // [row][column], in [0, 1]
  std::string row_axis, column_axis;
};

struct GroupedBars {
  std::string title;
  std::vector<std::string> groups;          // x-axis categories
  std::vector<std::string> series;          // one colour each
  std::vector<std::vector<double>> values;  // [series][group]
  std::string value_axis;
  bool log_scale = false;
};

std::string heat_map_svg(const HeatMap& map);
std::string grouped_bars_svg(const GroupedBars& bars);

}  // namespace oscar
