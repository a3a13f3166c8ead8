#include "quant/hadamard.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <numeric>

#include "util/error.h"

namespace oscar {

bool is_power_of_two(int64_t n) {
  return n > 0 && (n & (n - 1)) == 0;
}

std::vector<double> hadamard_matrix(int64_t n) {
  require(is_power_of_two(n), "Hadamard rotation needs a power-of-two size, got {}", n);
  const double norm = 1.0 / std::sqrt(double(n));
  std::vector<double> h(size_t(n * n));
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      h[size_t(i * n + j)] = (std::popcount(uint64_t(i & j)) % 2 == 0) ? norm : -norm;
    }
  }
  return h;
}

std::vector<int64_t> bit_reversal_permutation(const std::vector<double>& eigenvalues) {
  const int64_t d = int64_t(eigenvalues.size());
  require(is_power_of_two(d), "OSCAR rotation needs a power-of-two head_dim, got {}", d);
  const int bits = std::countr_zero(uint64_t(d));
  std::vector<int64_t> order(static_cast<size_t>(d));
  std::iota(order.begin(), order.end(), 0);
  // Decreasing eigenvalue; ties broken by index so the result is deterministic.
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
    return eigenvalues[size_t(a)] > eigenvalues[size_t(b)];
  });
  std::vector<int64_t> perm(static_cast<size_t>(d));
  for (int64_t i = 0; i < d; ++i) perm[size_t(bit_reverse(i, bits))] = order[size_t(i)];
  return perm;
}

int64_t bit_reverse(int64_t index, int bits) {
  int64_t reversed = 0;
  for (int b = 0; b < bits; ++b) {
    if (index & (int64_t(1) << b)) reversed |= int64_t(1) << (bits - 1 - b);
  }
  return reversed;
}

}  // namespace oscar
