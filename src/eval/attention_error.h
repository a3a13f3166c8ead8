#pragma once
// Per layer, how far each KV quantization method moves attention logits and outputs away from
// full precision, on activations recorded from a real text window (OSCAR spec, "What error
// matters"). Pure quantization error: no sink or recent window.
#include <cstdint>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "kvcache/kv_cache_config.h"
#include "quant/kv_rotations.h"

namespace oscar {

struct AttentionErrorMethod {
  std::string name;                        // e.g. "oscar g128"
  KvCacheConfig kv;                        // dtype, method, group size, clip ratios, scale format
  const KvRotations* rotations = nullptr;  // oscar: the calibrated file (others derive their own)
  // kv.value_error_feedback: the model's value_feedback_factors (model/value_error_feedback.h).
  std::vector<float> value_feedback;
};

struct LayerAttentionError {
  std::string method;
  int64_t layer = 0;
  double logits = 0;   // relative Frobenius error of attention logits, mean over KV heads
  double outputs = 0;  // relative error of attention outputs
};

// `backend`: full-precision, unrotated cache. Records `tokens` and evaluates every method.
std::vector<LayerAttentionError> evaluate_attention_error(
    Backend& backend, const std::vector<int32_t>& tokens,
    const std::vector<AttentionErrorMethod>& methods, int64_t query_stride = 4);

}  // namespace oscar
