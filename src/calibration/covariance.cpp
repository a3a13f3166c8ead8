#include "calibration/covariance.h"

#include "util/error.h"

namespace oscar {

OuterProductSums::OuterProductSums(int64_t num_slots, int64_t head_dim)
    : head_dim_(head_dim),
      sums_(size_t(num_slots * head_dim * head_dim), 0.0),
      weights_(size_t(num_slots), 0.0) {}

void OuterProductSums::add(int64_t slot, const float* x, double weight) {
  const int64_t d = head_dim_;
  double* sum = &sums_[size_t(slot * d * d)];
  for (int64_t i = 0; i < d; ++i) {
    const double wx = weight * double(x[i]);
    double* row = sum + i * d;
    for (int64_t j = i; j < d; ++j) row[j] += wx * double(x[j]);
  }
  weights_[size_t(slot)] += weight;
}

std::vector<double> OuterProductSums::mean(int64_t slot) const {
  const int64_t d = head_dim_;
  const double total = weights_[size_t(slot)];
  require(total > 0, "covariance slot {} received no data", slot);
  const double* sum = &sums_[size_t(slot * d * d)];
  std::vector<double> out(size_t(d * d));
  for (int64_t i = 0; i < d; ++i) {
    for (int64_t j = i; j < d; ++j) {
      out[size_t(i * d + j)] = out[size_t(j * d + i)] = sum[i * d + j] / total;
    }
  }
  return out;
}

double quadratic_form(const float* x, const std::vector<double>& c, int64_t d) {
  double total = 0;
  for (int64_t i = 0; i < d; ++i) {
    double row = 0;
    for (int64_t j = 0; j < d; ++j) row += c[size_t(i * d + j)] * double(x[j]);
    total += double(x[i]) * row;
  }
  return total;
}

}  // namespace oscar
