#include "quant/group_codec.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "util/half.h"

namespace oscar {
namespace {

constexpr float kQ8ZeroSteps = 16.0f;  // zero = z * scale / 16

int q8_exponent_at_least(float scale) {
  const double exponent = std::ceil(12.0 * (std::log2(double(scale)) + 12.0) - 1e-9);
  return int(std::clamp(exponent, 0.0, 255.0));
}

int q8_zero_code(float zero, float scale) {
  return int(std::clamp(std::nearbyint(zero * kQ8ZeroSteps / scale), -128.0f, 127.0f));
}

GroupParams q8_params_for_range(float lo, float hi, int bits) {
  const float levels = float((1 << bits) - 1);
  int exponent = q8_exponent_at_least(std::max((hi - lo) / levels, 1e-30f));
  // A zero far outside +-8 steps needs a coarser scale to stay representable.
  while (exponent < 255 && std::abs(lo * kQ8ZeroSteps / q8_scale(exponent)) > 127.5f) ++exponent;
  const float scale = q8_scale(exponent);
  return {scale, float(q8_zero_code(lo, scale)) * scale / kQ8ZeroSteps};
}

float round_half(float value, ParamFormat format) {
  return format == ParamFormat::f16 ? round_to_fp16(value) : round_to_bf16(value);
}

double squared_error(std::span<const float> values, GroupParams p, int bits) {
  const float max_code = float((1 << bits) - 1);
  double error = 0;
  for (const float v : values) {
    const float code = std::clamp(std::nearbyint((v - p.zero) / p.scale), 0.0f, max_code);
    const double diff = double(v) - double(code * p.scale + p.zero);
    error += diff * diff;
  }
  return error;
}

}  // namespace

float q8_scale(int exponent_code) {
  return std::exp2(float(exponent_code) / 12.0f - 12.0f);
}

GroupParams params_for_range(float lo, float hi, int bits, ParamFormat format) {
  if (format == ParamFormat::q8) return q8_params_for_range(lo, hi, bits);
  const float levels = float((1 << bits) - 1);
  if (format == ParamFormat::f32) {
    GroupParams params{(hi - lo) / levels, lo};
    if (!(params.scale > 0.0f)) params.scale = 1e-6f;
    return params;
  }
  GroupParams params{round_half((hi - lo) / levels, format), round_half(lo, format)};
  // A constant group (or one whose range underflows the format) still needs a usable scale.
  if (!(params.scale > 0.0f)) params.scale = round_half(1e-6f, format);
  return params;
}

GroupParams choose_group_params(std::span<const float> values, int bits, ClipPolicy clip,
                                ParamFormat format) {
  const auto [low_it, high_it] = std::minmax_element(values.begin(), values.end());
  const float low = *low_it, high = *high_it;
  if (!clip.search) return params_for_range(low * clip.ratio, high * clip.ratio, bits, format);
  GroupParams best{};
  double best_error = 0;
  for (int i = 0; i < kClipCandidateCount; ++i) {
    const float c = clip_candidate(i);
    const GroupParams candidate = params_for_range(low * c, high * c, bits, format);
    const double error = squared_error(values, candidate, bits);
    if (i == 0 || error < best_error) {
      best = candidate;
      best_error = error;
    }
  }
  return best;
}

void choose_row_params(std::span<const float> row, int group_size, int bits, ClipPolicy clip,
                       ParamFormat format, std::span<GroupParams> params) {
  for (size_t g = 0; g < params.size(); ++g) {
    params[g] = choose_group_params(row.subspan(g * size_t(group_size), size_t(group_size)), bits,
                                    clip, format);
  }
}

int quantize_code(float value, GroupParams params, int bits) {
  const float scaled = std::nearbyint((value - params.zero) / params.scale);
  return int(std::clamp(scaled, 0.0f, float((1 << bits) - 1)));
}

void quantize_group(std::span<const float> values, GroupParams params, int bits, uint8_t* codes) {
  std::memset(codes, 0, size_t(packed_bytes(int(values.size()), bits)));
  for (size_t i = 0; i < values.size(); ++i) {
    const int code = quantize_code(values[i], params, bits);
    const size_t bit = i * size_t(bits);
    codes[bit / 8] |= uint8_t(code << (bit % 8));
  }
}

uint8_t code_at(const uint8_t* codes, int index, int bits) {
  const int bit = index * bits;
  return uint8_t((codes[bit / 8] >> (bit % 8)) & ((1 << bits) - 1));
}

void dequantize_group(const uint8_t* codes, int first, int count, GroupParams params, int bits,
                      float* out) {
  for (int i = 0; i < count; ++i) {
    out[i] = float(code_at(codes, first + i, bits)) * params.scale + params.zero;
  }
}

void store_params(GroupParams params, ParamFormat format, uint8_t* out) {
  if (format == ParamFormat::q8) {
    // Exact inverse of load_params for parameters made by params_for_range.
    out[0] = uint8_t(
        std::clamp(std::nearbyint(12.0f * (std::log2(params.scale) + 12.0f)), 0.0f, 255.0f));
    out[1] = uint8_t(int8_t(q8_zero_code(params.zero, q8_scale(out[0]))));
    return;
  }
  if (format == ParamFormat::f32) {
    const float pair[2] = {params.scale, params.zero};
    std::memcpy(out, pair, sizeof(pair));
    return;
  }
  const bool f16 = format == ParamFormat::f16;
  const uint16_t encoded[2] = {f16 ? float_to_fp16(params.scale) : float_to_bf16(params.scale),
                               f16 ? float_to_fp16(params.zero) : float_to_bf16(params.zero)};
  std::memcpy(out, encoded, sizeof(encoded));
}

GroupParams load_params(const uint8_t* in, ParamFormat format) {
  if (format == ParamFormat::q8) {
    const float scale = q8_scale(in[0]);
    return {scale, float(int8_t(in[1])) * scale / kQ8ZeroSteps};
  }
  if (format == ParamFormat::f32) {
    float pair[2];
    std::memcpy(pair, in, sizeof(pair));
    return {pair[0], pair[1]};
  }
  uint16_t encoded[2];
  std::memcpy(encoded, in, sizeof(encoded));
  if (format == ParamFormat::f16) return {fp16_to_float(encoded[0]), fp16_to_float(encoded[1])};
  return {bf16_to_float(encoded[0]), bf16_to_float(encoded[1])};
}

}  // namespace oscar
