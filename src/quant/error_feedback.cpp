#include "quant/error_feedback.h"

#include <Eigen/Dense>
#include <algorithm>
#include <cmath>

#include "quant/hadamard.h"
#include "util/error.h"

namespace oscar {

std::vector<float> feedback_factor(std::span<const double> damped, int64_t d) {
  const Eigen::MatrixXd a = Eigen::Map<const Eigen::MatrixXd>(damped.data(), d, d);
  const Eigen::LLT<Eigen::MatrixXd> inverse_factor(a.inverse());
  require(inverse_factor.info() == Eigen::Success,
          "error feedback: the damped Hessian is not positive definite");
  const Eigen::MatrixXd upper = inverse_factor.matrixU();
  std::vector<float> factor(size_t(d * d));
  for (int64_t j = 0; j < d; ++j)
    for (int64_t l = 0; l < d; ++l) factor[size_t(j * d + l)] = float(upper(j, l) / upper(j, j));
  return factor;
}

std::vector<float> key_feedback_factor(std::span<const float> eigenvalues_decreasing,
                                       double damping) {
  const int64_t d = int64_t(eigenvalues_decreasing.size());
  // U's columns (and the eigenvalues that spectral_rotation permutes by) are in increasing order.
  std::vector<double> increasing(eigenvalues_decreasing.rbegin(), eigenvalues_decreasing.rend());
  const std::vector<int64_t> perm = bit_reversal_permutation(increasing);
  const std::vector<double> h = hadamard_matrix(d);
  // B = U^T R = H P: B[k][j] = H[k][perm[j]]; M = B^T diag(lambda) B.
  Eigen::MatrixXd b(d, d);
  for (int64_t k = 0; k < d; ++k)
    for (int64_t j = 0; j < d; ++j) b(k, j) = h[size_t(k * d + perm[size_t(j)])];
  const Eigen::VectorXd lambda =
      Eigen::Map<const Eigen::VectorXd>(increasing.data(), d).cwiseMax(0.0);
  Eigen::MatrixXd m = b.transpose() * lambda.asDiagonal() * b;
  m.diagonal().array() += damping * std::max(lambda.mean(), 1e-30);
  return feedback_factor(std::span<const double>(m.data(), size_t(d * d)), d);
}

std::vector<float> key_feedback_factors(const KvRotations& rotations, double damping) {
  const int64_t d = rotations.head_dim;
  const int64_t per_layer = rotations.rotations_per_layer();
  require(int64_t(rotations.key_eigenvalues.size()) == rotations.num_layers * per_layer * d,
          "key error feedback: the rotations file holds no key eigenvalues (make it with `oscar "
          "calibrate`, or "
          "pass --no-kv-key-error-feedback)");
  std::vector<float> factors;
  factors.reserve(size_t(rotations.num_layers * rotations.num_kv_heads * d * d));
  for (int64_t layer = 0; layer < rotations.num_layers; ++layer) {
    for (int64_t h = 0; h < rotations.num_kv_heads; ++h) {
      const int64_t r = layer * per_layer + (rotations.per_head ? h : 0);
      const std::vector<float> factor = key_feedback_factor(
          std::span(&rotations.key_eigenvalues[size_t(r * d)], size_t(d)), damping);
      factors.insert(factors.end(), factor.begin(), factor.end());
    }
  }
  return factors;
}

void round_with_feedback(std::span<const float> row, std::span<const GroupParams> params,
                         int group_size, int bits, std::span<const float> factor,
                         std::span<float> dequantized) {
  const size_t d = row.size();
  const float max_code = float((1 << bits) - 1);
  std::vector<float> running(row.begin(), row.end());
  for (size_t j = 0; j < d; ++j) {
    const GroupParams p = params[j / size_t(group_size)];
    const float inverse_scale = 1.0f / p.scale;
    const float code =
        std::clamp(std::nearbyint((running[j] - p.zero) * inverse_scale), 0.0f, max_code);
    dequantized[j] = code * p.scale + p.zero;
    const float error = running[j] - dequantized[j];
    for (size_t l = j + 1; l < d; ++l) running[l] = std::fma(-error, factor[j * d + l], running[l]);
  }
}

}  // namespace oscar
