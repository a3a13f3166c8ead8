#pragma once
// OSCAR keys and values rounded with error feedback. A row's rounding error e costs e^T M e for a
// Hessian M of what reads the row: for a key (in the rotated space where keys are stored) the mean
// square change of a query's score, M = R^T C_Q R = (H P)^T diag(lambda) (H P) (R = U H P,
// C_Q = U diag(lambda) U^T); for a value, the change of the attention block's output through the
// output projection (model/value_error_feedback.h). Rounding to nearest spreads the error evenly
// over M's eigen-directions, the strong ones included; rounding the channels in turn and carrying
// each one's error into the channels not yet rounded (the GPTQ update with M as the Hessian) moves
// it towards the directions that matter least. Group parameters (scale, zero) are chosen as before;
// only the codes differ, so the stored format and every reader stay the same.
#include <cstdint>
#include <span>
#include <vector>

#include "quant/group_codec.h"
#include "quant/kv_rotations.h"

namespace oscar {

// M is damped by this fraction of its mean eigenvalue before it is inverted (GPTQ's default): the
// smallest eigenvalues of C_Q are near zero.
inline constexpr double kKeyFeedbackDamping = 0.01;

// The unit upper-triangular factor G of a damped Hessian's inverse, A^-1 = G^T diag(s) G: the upper
// Cholesky factor's rows divided by their diagonal (in double), so G A G^T is diagonal. `damped`:
// A, D x D (symmetric positive definite); returns G, D x D row-major.
std::vector<float> feedback_factor(std::span<const double> damped, int64_t d);

// The keys' G for M + damping * mean(lambda) * I, from C_Q's eigenvalues in decreasing order as
// `oscar calibrate` stores them.
std::vector<float> key_feedback_factor(std::span<const float> eigenvalues_decreasing,
                                       double damping = kKeyFeedbackDamping);

// The factors of every (layer, KV head), [layers][kv_heads][D][D], from the key eigenvalues of a
// rotations file (`oscar calibrate` writes them); both backends round with these.
std::vector<float> key_feedback_factors(const KvRotations& rotations,
                                        double damping = kKeyFeedbackDamping);

// Rounds one row of D channels (a rotated key, or a value) with error feedback: channel j takes the
// code clamp(rint((running - zero) * (1 / scale))) of its group's `params` (groups of `group_size`
// channels) for its running value, and its error (running - code * scale - zero) is subtracted from
// channels l > j times G[j][l]. Multiplying by the reciprocal instead of dividing (as quantize_code
// does) can move a value lying within a rounding error of a midpoint to the other code; it keeps a
// division, and its latency, out of the 128 dependent steps (the GPU's migration waits on them).
// `dequantized` receives each channel's code * scale + zero (quantize_group recovers the codes).
void round_with_feedback(std::span<const float> row, std::span<const GroupParams> params,
                         int group_size, int bits, std::span<const float> factor,
                         std::span<float> dequantized);

}  // namespace oscar
