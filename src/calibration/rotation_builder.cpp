#include "calibration/rotation_builder.h"

#include <Eigen/Dense>
#include <algorithm>
#include <bit>
#include <numeric>

#include "quant/hadamard.h"
#include "util/error.h"

namespace oscar {

std::vector<int64_t> bit_reversal_permutation(const std::vector<double>& eigenvalues) {
  const int64_t d = int64_t(eigenvalues.size());
  require(is_power_of_two(d), "OSCAR rotation needs a power-of-two head_dim, got {}", d);
  const int bits = std::countr_zero(uint64_t(d));
  std::vector<int64_t> order(static_cast<size_t>(d));
  std::iota(order.begin(), order.end(), 0);
  // Decreasing eigenvalue; ties broken by index so the result is deterministic.
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return eigenvalues[size_t(a)] > eigenvalues[size_t(b)]; });
  std::vector<int64_t> perm(static_cast<size_t>(d));
  for (int64_t i = 0; i < d; ++i) perm[size_t(bit_reverse(i, bits))] = order[size_t(i)];
  return perm;
}

SpectralRotation spectral_rotation(const std::vector<double>& covariance, int64_t d) {
  using Matrix = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  require(int64_t(covariance.size()) == d * d, "covariance holds {} values, expected {}",
          covariance.size(), d * d);
  const Matrix c = Eigen::Map<const Matrix>(covariance.data(), d, d);
  const Matrix symmetric = 0.5 * (c + c.transpose());
  const Eigen::SelfAdjointEigenSolver<Matrix> solver(symmetric);
  require(solver.info() == Eigen::Success, "eigendecomposition did not converge");
  const Matrix u = solver.eigenvectors();  // columns, ascending eigenvalues
  std::vector<double> eigenvalues(solver.eigenvalues().data(), solver.eigenvalues().data() + d);
  const std::vector<int64_t> perm = bit_reversal_permutation(eigenvalues);
  const Matrix h = Eigen::Map<const Matrix>(hadamard_matrix(d).data(), d, d);
  const Matrix uh = u * h;
  SpectralRotation result;
  result.rotation.resize(size_t(d * d));
  for (int64_t i = 0; i < d; ++i)
    for (int64_t j = 0; j < d; ++j) result.rotation[size_t(i * d + j)] = uh(i, perm[size_t(j)]);
  std::sort(eigenvalues.begin(), eigenvalues.end(), std::greater<>());
  result.eigenvalues = eigenvalues;
  return result;
}

}  // namespace oscar
