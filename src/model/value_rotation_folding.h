#pragma once
// Folds the value rotation R_V into the weights (OSCAR spec, "Read path"), so values are stored
// rotated with no run-time cost and the attention output needs no inverse rotation:
//   W_v' = R_V^T W_v           for each KV head's block of rows   (v' = v R_V)
//   W_o'[:, h] = W_o[:, h] R_V(kv(h))   for each query head's block of columns
#include <cstdint>

#include "model/model_config.h"
#include "quant/kv_rotations.h"

namespace oscar {

// v_proj: [num_kv_heads * D, hidden] row-major; o_proj: [hidden, num_heads * D] row-major.
void fold_value_rotation(const ModelConfig& config, const KvRotations& rotations, int64_t layer,
                         float* v_proj, float* o_proj);

}  // namespace oscar
