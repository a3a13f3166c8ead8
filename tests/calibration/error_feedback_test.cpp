// Key rounding with error feedback (quant/error_feedback.h) against the rotation calibration
// builds: the factor inverts the damped query covariance in the rotated key space, and rounding
// with it leaves a smaller query-weighted error than rounding to nearest, with the same parameters.
#include <gtest/gtest.h>

#include <Eigen/Dense>
#include <random>

#include "calibration/rotation_builder.h"
#include "quant/error_feedback.h"

namespace oscar {
namespace {

// A random query covariance with a few strong directions, as post-RoPE queries have.
std::vector<double> skewed_covariance(int64_t d, uint64_t seed) {
  std::mt19937_64 generator(seed);
  std::normal_distribution<double> normal;
  Eigen::MatrixXd basis(d, d);
  for (int64_t i = 0; i < d * d; ++i) basis.data()[i] = normal(generator);
  const Eigen::MatrixXd q = Eigen::HouseholderQR<Eigen::MatrixXd>(basis).householderQ();
  Eigen::VectorXd lambda(d);
  for (int64_t i = 0; i < d; ++i) lambda(i) = 100.0 * std::pow(0.8, double(i));
  const Eigen::MatrixXd c = q * lambda.asDiagonal() * q.transpose();
  return std::vector<double>(c.data(), c.data() + d * d);  // symmetric: order does not matter
}

struct RotatedSpace {
  Eigen::MatrixXd m;  // R^T C_Q R
  std::vector<float> eigenvalues;
};

RotatedSpace rotated_space(int64_t d, uint64_t seed) {
  const std::vector<double> c = skewed_covariance(d, seed);
  const SpectralRotation r = spectral_rotation(c, d);
  const Eigen::MatrixXd rotation =
      Eigen::Map<const Eigen::Matrix<double, -1, -1, Eigen::RowMajor>>(r.rotation.data(), d, d);
  const Eigen::MatrixXd cq = Eigen::Map<const Eigen::MatrixXd>(c.data(), d, d);
  return {rotation.transpose() * cq * rotation,
          std::vector<float>(r.eigenvalues.begin(), r.eigenvalues.end())};
}

// G is unit upper triangular and (M + damping)^-1 = G^T diag(s) G with s > 0: G (M + damping) G^T
// is diagonal and positive.
TEST(KeyErrorFeedback, FactorDecorrelatesTheDampedQueryCovarianceOfTheRotatedKeys) {
  const int64_t d = 16;
  const RotatedSpace space = rotated_space(d, 3);
  const std::vector<float> factor = key_feedback_factor(space.eigenvalues, kKeyFeedbackDamping);
  Eigen::MatrixXd g(d, d);
  for (int64_t j = 0; j < d; ++j)
    for (int64_t l = 0; l < d; ++l) g(j, l) = factor[size_t(j * d + l)];
  for (int64_t j = 0; j < d; ++j) {
    EXPECT_EQ(g(j, j), 1.0) << "unit diagonal";
    for (int64_t l = 0; l < j; ++l) EXPECT_EQ(g(j, l), 0.0) << "upper triangular";
  }
  double mean = 0;
  for (float e : space.eigenvalues) mean += e / double(d);
  const Eigen::MatrixXd damped =
      space.m + kKeyFeedbackDamping * mean * Eigen::MatrixXd::Identity(d, d);
  const Eigen::MatrixXd product = g * damped * g.transpose();
  for (int64_t j = 0; j < d; ++j) {
    EXPECT_GT(product(j, j), 0.0);
    for (int64_t l = 0; l < d; ++l) {
      if (l == j) continue;
      EXPECT_LT(std::abs(product(j, l)), 1e-4 * std::sqrt(product(j, j) * product(l, l)))
          << j << "," << l;
    }
  }
}

TEST(KeyErrorFeedback, LowersTheQueryWeightedErrorWithTheSameParameters) {
  const int64_t d = 64;
  const int group = 32, bits = 2;
  const RotatedSpace space = rotated_space(d, 5);
  const std::vector<float> factor = key_feedback_factor(space.eigenvalues);
  std::mt19937_64 generator(9);
  std::normal_distribution<float> normal;
  double nearest_error = 0, feedback_error = 0;
  for (int row_index = 0; row_index < 300; ++row_index) {
    std::vector<float> row(static_cast<size_t>(d));
    for (float& x : row) x = normal(generator);
    std::vector<GroupParams> params;
    std::vector<float> nearest(static_cast<size_t>(d)), fed_back(static_cast<size_t>(d));
    for (int64_t g = 0; g < d / group; ++g) {
      const std::span<const float> values(row.data() + g * group, size_t(group));
      params.push_back(choose_group_params(values, bits, {1.0f, true}, ParamFormat::q8));
      std::vector<uint8_t> codes(size_t(packed_bytes(group, bits)));
      quantize_group(values, params.back(), bits, codes.data());
      dequantize_group(codes.data(), 0, group, params.back(), bits, nearest.data() + g * group);
    }
    round_with_feedback(row, params, group, bits, factor, fed_back);
    Eigen::VectorXd e_nearest(d), e_feedback(d);
    for (int64_t j = 0; j < d; ++j) {
      const GroupParams p = params[size_t(j / group)];
      const float code = (fed_back[size_t(j)] - p.zero) / p.scale;
      ASSERT_NEAR(code, std::nearbyint(code), 1e-3) << "a code of the group's grid";
      ASSERT_GE(std::nearbyint(code), 0.0f);
      ASSERT_LE(std::nearbyint(code), 3.0f);
      e_nearest(j) = double(nearest[size_t(j)]) - row[size_t(j)];
      e_feedback(j) = double(fed_back[size_t(j)]) - row[size_t(j)];
    }
    nearest_error += e_nearest.dot(space.m * e_nearest);
    feedback_error += e_feedback.dot(space.m * e_feedback);
  }
  std::printf("query-weighted key error: nearest %.4g, with feedback %.4g\n", nearest_error,
              feedback_error);
  EXPECT_LT(feedback_error, 0.7 * nearest_error);
}

}  // namespace
}  // namespace oscar
