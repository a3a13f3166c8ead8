#pragma once
// Small summaries of measured samples, shared by the benchmarks.
#include <algorithm>
#include <vector>

namespace oscar {

// The middle value (the upper one of an even count); 0 for no samples.
inline double median(std::vector<double> values) {
  if (values.empty()) return 0.0;
  std::nth_element(values.begin(), values.begin() + ptrdiff_t(values.size() / 2), values.end());
  return values[values.size() / 2];
}

}  // namespace oscar
