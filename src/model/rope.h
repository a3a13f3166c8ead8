#pragma once
// Rotary position embedding, "rotate half" (NeoX) layout, computed the way transformers computes
// it in float32: inverse frequencies (with Llama-3 scaling when configured), angle = position *
// inv_freq rounded to float, cos/sin of that angle.
#include <cstdint>
#include <span>
#include <vector>

#include "model/model_config.h"

namespace oscar {

std::vector<float> rope_inverse_frequencies(const ModelConfig& config);  // head_dim / 2 values

// cos and sin (head_dim / 2 values each) for one position.
void rope_cos_sin(std::span<const float> inverse_frequencies, int64_t position, float* cos_out,
                  float* sin_out);

// x[i] and x[i + D/2] rotate by the angle of frequency i; x holds head_dim values.
void apply_rope(float* x, const float* cos_values, const float* sin_values, int64_t head_dim);

}  // namespace oscar
