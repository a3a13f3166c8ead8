#pragma once
// Weighted sums of outer products x^T x in float64, one D x D matrix per slot (a (layer, KV
// head) pair), accumulated in a fixed order so equal inputs give identical sums.
#include <cstddef>
#include <cstdint>
#include <vector>

namespace oscar {

class OuterProductSums {
 public:
  OuterProductSums(int64_t num_slots, int64_t head_dim);

  // sum[slot] += weight * x^T x, x one row of head_dim floats.
  void add(int64_t slot, const float* x, double weight = 1.0);
  // sum[slot] / total weight, full symmetric D x D row-major.
  std::vector<double> mean(int64_t slot) const;
  double total_weight(int64_t slot) const { return weights_[size_t(slot)]; }
  int64_t num_slots() const { return int64_t(weights_.size()); }
  int64_t head_dim() const { return head_dim_; }

 private:
  int64_t head_dim_;
  std::vector<double> sums_;  // upper triangles, stored as full rows for simple indexing
  std::vector<double> weights_;
};

// x C x^T for a row x and a D x D row-major C.
double quadratic_form(const float* x, const std::vector<double>& c, int64_t head_dim);

}  // namespace oscar
