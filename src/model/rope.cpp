#include "model/rope.h"

#include <cmath>
#include <numbers>

namespace oscar {

std::vector<float> rope_inverse_frequencies(const ModelConfig& config) {
  const int64_t half = config.head_dim / 2;
  std::vector<float> inverse(static_cast<size_t>(half));
  for (int64_t i = 0; i < half; ++i) {
    const float exponent = float(2 * i) / float(config.head_dim);
    inverse[size_t(i)] = float(1.0 / std::pow(config.block.rope_theta, double(exponent)));
  }
  if (!config.block.rope_scaling.llama3) return inverse;
  // Llama 3.1 (transformers _compute_llama3_parameters): long wavelengths are divided by
  // `factor`, short ones kept, the band in between interpolated smoothly.
  const RopeScaling& s = config.block.rope_scaling;
  const double old_context = double(s.original_max_position_embeddings);
  const double low_freq_wavelength = old_context / s.low_freq_factor;
  const double high_freq_wavelength = old_context / s.high_freq_factor;
  for (float& frequency : inverse) {
    const double wavelength = 2.0 * std::numbers::pi / frequency;
    if (wavelength > low_freq_wavelength) {
      frequency = float(frequency / s.factor);
    } else if (wavelength >= high_freq_wavelength) {
      const double smooth =
          (old_context / wavelength - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor);
      frequency = float((1.0 - smooth) * frequency / s.factor + smooth * frequency);
    }
  }
  return inverse;
}

void rope_cos_sin(std::span<const float> inverse_frequencies, int64_t position, float* cos_out,
                  float* sin_out) {
  const float position_f = float(position);
  for (size_t i = 0; i < inverse_frequencies.size(); ++i) {
    const float angle = position_f * inverse_frequencies[i];
    cos_out[i] = float(std::cos(double(angle)));
    sin_out[i] = float(std::sin(double(angle)));
  }
}

void apply_rope(float* x, const float* cos_values, const float* sin_values, int64_t head_dim) {
  const int64_t half = head_dim / 2;
  for (int64_t i = 0; i < half; ++i) {
    const float first = x[i];
    const float second = x[i + half];
    x[i] = first * cos_values[i] - second * sin_values[i];
    x[i + half] = second * cos_values[i] + first * sin_values[i];
  }
}

}  // namespace oscar
