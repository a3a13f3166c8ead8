#pragma once
// OSCAR's rotation from a covariance (method spec, "Calibration", steps 3-4):
//   C = U diag(lambda) U^T (symmetrised, eigh in float64),
//   R = U * H * P_br, H the normalised Walsh-Hadamard matrix, P_br = I[:, perm] with
//   perm[br(i)] = order[i], order = eigenvalue indices by decreasing eigenvalue.
#include <cstdint>
#include <vector>

#include "quant/hadamard.h"  // bit_reversal_permutation

namespace oscar {

struct SpectralRotation {
  std::vector<double> rotation;     // D x D row-major: a row vector x is stored as x R
  std::vector<double> eigenvalues;  // decreasing
};

// `covariance`: D x D row-major (need not be exactly symmetric).
SpectralRotation spectral_rotation(const std::vector<double>& covariance, int64_t head_dim);

}  // namespace oscar
