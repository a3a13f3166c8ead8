#include "quant/published_quantizer.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace oscar {

int row_quantile_index(float ratio, int head_dim) {
  return std::clamp(int(double(ratio) * double(head_dim)), 0, head_dim - 1);
}

void clamp_row_at_quantile(std::span<float> row, float ratio) {
  std::vector<float> magnitudes(row.size());
  std::transform(row.begin(), row.end(), magnitudes.begin(), [](float x) { return std::abs(x); });
  const auto index = magnitudes.begin() + row_quantile_index(ratio, int(row.size()));
  std::nth_element(magnitudes.begin(), index, magnitudes.end());
  const float threshold = *index;
  for (float& x : row) x = std::clamp(x, -threshold, threshold);
}

void lloyd_max_row(std::span<const float> row, ParamFormat format, std::span<GroupParams> params,
                   std::span<float> dequantized) {
  double sum = 0, sum_squares = 0;
  for (const float x : row) sum += x;
  const double mean = sum / double(row.size());
  for (const float x : row) sum_squares += (x - mean) * (x - mean);
  const double deviation = std::sqrt(sum_squares / double(row.size()));
  const double half_range = 1.5 * kLloydMaxScaleRatio * deviation;
  const GroupParams grid =
      params_for_range(float(mean - half_range), float(mean + half_range), 2, format);
  std::fill(params.begin(), params.end(), grid);
  const double threshold = kLloydMaxThreshold * deviation;
  for (size_t i = 0; i < row.size(); ++i) {
    const double centred = row[i] - mean;
    const int code = centred < -threshold ? 0 : centred < 0 ? 1 : centred < threshold ? 2 : 3;
    dequantized[i] = float(code) * grid.scale + grid.zero;
  }
}

}  // namespace oscar
