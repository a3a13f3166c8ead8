// R = U H P_br on hand-checked cases, and the bit-reversal permutation for D = 8.
#include <gtest/gtest.h>

#include <cmath>

#include "calibration/rotation_builder.h"
#include "quant/kv_rotations.h"

namespace oscar {
namespace {

TEST(BitReversalPermutation, EightChannels) {
  // Eigenvalues in U's column order; decreasing order is columns 3, 0, 6, 1, 7, 2, 5, 4.
  const std::vector<double> eigenvalues = {7, 5, 3, 8, 0.5, 1, 6, 4};
  const std::vector<int64_t> order = {3, 0, 6, 1, 7, 2, 5, 4};
  // perm[br(i)] = order[i]; br over 3 bits = 0 4 2 6 1 5 3 7.
  const int64_t br[8] = {0, 4, 2, 6, 1, 5, 3, 7};
  std::vector<int64_t> expected(8);
  for (int i = 0; i < 8; ++i) expected[size_t(br[i])] = order[size_t(i)];
  EXPECT_EQ(bit_reversal_permutation(eigenvalues), expected);
  EXPECT_EQ(expected, (std::vector<int64_t>{3, 7, 6, 5, 0, 2, 1, 4}));
}

// A diagonal covariance makes U a permutation (up to signs), so R is checkable by hand:
// diag(1, 4, 2, 3): eigh gives ascending eigenvalues 1, 2, 3, 4 with U = e0, e2, e3, e1 (signs
// aside); order (decreasing) = U columns 3, 2, 1, 0; perm[br(i)] = order[i] -> perm = 3, 1, 2, 0.
TEST(SpectralRotation, DiagonalCovarianceByHand) {
  const std::vector<double> covariance = {1, 0, 0, 0, 0, 4, 0, 0, 0, 0, 2, 0, 0, 0, 0, 3};
  const SpectralRotation r = spectral_rotation(covariance, 4);
  EXPECT_EQ(r.eigenvalues, (std::vector<double>{4, 3, 2, 1}));
  // U H P_br: row i of R is (U row i) H, then columns permuted by perm = 3, 1, 2, 0.
  // U row 0 = e0 (column 0), row 1 -> column 3, row 2 -> column 1, row 3 -> column 2.
  const double h[4][4] = {{1, 1, 1, 1}, {1, -1, 1, -1}, {1, 1, -1, -1}, {1, -1, -1, 1}};
  const int u_column_of_row[4] = {0, 3, 1, 2};
  const int perm[4] = {3, 1, 2, 0};
  for (int i = 0; i < 4; ++i) {
    for (int j = 0; j < 4; ++j) {
      const double expected = h[u_column_of_row[i]][perm[j]] / 2.0;
      EXPECT_NEAR(std::abs(r.rotation[size_t(i * 4 + j)]), std::abs(expected), 1e-12)
          << i << "," << j;
    }
  }
  std::vector<float> as_float(r.rotation.begin(), r.rotation.end());
  EXPECT_LT(orthogonality_error(as_float.data(), 4), 1e-6);
}

TEST(SpectralRotation, DiagonalisesTheCovarianceBeforeTheHadamard) {
  // For R = U H P_br: R P_br^T H^T = U, and U^T C U is diagonal with the eigenvalues.
  const int64_t d = 8;
  std::vector<double> c(size_t(d * d));
  for (int64_t i = 0; i < d; ++i)
    for (int64_t j = 0; j < d; ++j)
      c[size_t(i * d + j)] = 1.0 / double(1 + i + j) + (i == j ? 0.5 : 0.0);
  const SpectralRotation r = spectral_rotation(c, d);
  // R^T C R has the same trace and determinant-free invariants; check trace and orthogonality.
  double trace_c = 0, trace_rcr = 0;
  for (int64_t i = 0; i < d; ++i) trace_c += c[size_t(i * d + i)];
  for (int64_t j = 0; j < d; ++j) {
    double v = 0;
    for (int64_t a = 0; a < d; ++a)
      for (int64_t b = 0; b < d; ++b)
        v += r.rotation[size_t(a * d + j)] * c[size_t(a * d + b)] * r.rotation[size_t(b * d + j)];
    trace_rcr += v;
  }
  EXPECT_NEAR(trace_c, trace_rcr, 1e-9);
  double sum_eigen = 0;
  for (const double e : r.eigenvalues) sum_eigen += e;
  EXPECT_NEAR(sum_eigen, trace_c, 1e-9);
  EXPECT_TRUE(std::is_sorted(r.eigenvalues.rbegin(), r.eigenvalues.rend()));
}

}  // namespace
}  // namespace oscar
