#pragma once
// The quantizer of the published OSCAR code, for one per-token row (one token of one KV head, D
// channels), beside oscar's own (group_codec.h scales each group's min and max by the clip ratio):
//   row-quantile clip: sort |x| over the row and take the element at index int(c * D) as the
//     threshold t (D = 128: index 122 for keys at c = 0.96, 117 for values at c = 0.92); clamp the
//     row to [-t, t]; then plain min/max per group: scale = (max - min) / 3, zero = min
//     (the published zero -min / scale is the same grid written in steps).
//   Lloyd-Max codes (the later Qwen3-8B recipe): after the clip, standardise the row by its mean m
//     and standard deviation s; codes by the thresholds m - 0.981 s, m, m + 0.981 s (the 4-level
//     Lloyd-Max quantizer of a Gaussian); stored as a uniform grid centred on m with
//     scale = 1.16 s, zero = m - 1.5 * scale, so every reader dequantizes as code * scale + zero.
#include <span>

#include "quant/group_codec.h"

namespace oscar {

inline constexpr float kLloydMaxThreshold = 0.981f;  // in standard deviations
inline constexpr float kLloydMaxScaleRatio = 1.16f;  // stored scale / standard deviation

// The index of the clip threshold among the row's sorted magnitudes: int(ratio * D), at most D - 1.
int row_quantile_index(float ratio, int head_dim);

// Clamps `row` in place to [-t, t], t its row_quantile_index-th smallest magnitude.
void clamp_row_at_quantile(std::span<float> row, float ratio);

// Lloyd-Max codes of a (clipped) row: every group's `params` (one per group of the row) (the row's
// uniform-equivalent grid, rounded to `format`) and in `dequantized` each channel's code * scale +
// zero, from which quantize_group recovers the codes.
void lloyd_max_row(std::span<const float> row, ParamFormat format, std::span<GroupParams> params,
                   std::span<float> dequantized);

}  // namespace oscar
