#pragma once
// What quantizing a head's keys and values costs attention, measured offline on captured
// activations (calibration reports, `oscar eval attn-error`): rows are rotated, quantized with the
// cache's codec, dequantized and rotated back, then causal attention logits and outputs are
// compared with the exact ones (OSCAR method spec, "What error matters").
#include <cstdint>
#include <vector>

#include "quant/group_codec.h"

namespace oscar {

struct RowCodec {
  int bits = 2;
  int group_size = 128;
  ParamFormat param_format = ParamFormat::f16;
  ClipPolicy clip;
  bool per_channel = false;  // KIVI keys: groups of group_size tokens per channel
  // OSCAR keys or values rounded with error feedback: this head's factor (error_feedback.h),
  // D x D; null: nearest rounding.
  const float* feedback = nullptr;
};

// rows: [tokens][head_dim]; rotation: D x D row-major or null (identity). Returns the rows as the
// cache would return them, in the original basis.
std::vector<float> quantize_round_trip(const float* rows, int64_t tokens, int64_t head_dim,
                                       const float* rotation, const RowCodec& codec);

struct AttentionError {
  double logits = 0;   // ||Q K^T - Q K'^T||_F / ||Q K^T||_F over causal pairs
  double outputs = 0;  // ||softmax(Q K^T) V - softmax(Q K'^T) V'||_F / ||softmax(Q K^T) V||_F
};

// One KV head and its query heads. queries: [tokens][group][head_dim]; keys, values (exact) and
// keys_hat, values_hat (as stored): [tokens][head_dim]. Errors are sums over the group's heads and
// over the queries at positions stride-1, 2*stride-1, ... (each against all earlier keys).
AttentionError attention_error(const float* queries, int64_t group, const float* keys,
                               const float* values, const float* keys_hat, const float* values_hat,
                               int64_t tokens, int64_t head_dim, int64_t query_stride = 1);

}  // namespace oscar
