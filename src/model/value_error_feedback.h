#pragma once
// OSCAR values rounded with error feedback (quant/error_feedback.h). A value's rounding error e, in
// the rotated space where values are stored (R_V is folded into W_v and W_o), reaches the attention
// block's output as a_g(t) * e W_g'^T for each query head g of its KV head's group, where
// W_g' = W_o[:, gD:(g+1)D] R_V. With the attention weights taken as independent of the error, its
// mean square is e^T M e with M = sum_g W_g'^T W_g' = R_V^T (sum_g W_g^T W_g) R_V: known from the
// weights, with no calibration. (The output projection of the testbed weighs its strongest value
// direction 4-16x its mean: less skewed than the query covariance that keys see.)
#include <cstdint>
#include <vector>

#include "model/model_weights.h"
#include "quant/kv_rotations.h"

namespace oscar {

// M is damped by this fraction of its mean diagonal before it is inverted, as for keys.
inline constexpr double kValueFeedbackDamping = 0.01;

// KV heads [first, first + count) of a model: a tensor-parallel rank's share, or all of them.
struct KvHeadRange {
  int64_t first = 0;
  int64_t count = -1;  // -1: to the model's last KV head
};

// The factors G of every layer and KV head in `heads`, [layers][heads][D][D]
// (quant/error_feedback.h), from the model's output projections as loaded (before folding) and the
// rotations file's R_V, in double: both backends round with these, so they agree code for code.
std::vector<float> value_feedback_factors(const ModelWeights& weights, const KvRotations& rotations,
                                          KvHeadRange heads = {},
                                          double damping = kValueFeedbackDamping);

}  // namespace oscar
