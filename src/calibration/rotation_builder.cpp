#include "calibration/rotation_builder.h"

#include <Eigen/Dense>
#include <algorithm>

#include "quant/hadamard.h"
#include "util/error.h"

namespace oscar {

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
