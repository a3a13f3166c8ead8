#include "quant/group_codec.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "util/half.h"

namespace oscar {
namespace {

float round_param(float value, ParamFormat format) {
  return format == ParamFormat::f16 ? round_to_fp16(value) : round_to_bf16(value);
}

uint16_t encode_param(float value, ParamFormat format) {
  return format == ParamFormat::f16 ? float_to_fp16(value) : float_to_bf16(value);
}

float decode_param(uint16_t bits, ParamFormat format) {
  return format == ParamFormat::f16 ? fp16_to_float(bits) : bf16_to_float(bits);
}

}  // namespace

GroupParams choose_group_params(std::span<const float> values, int bits, float clip_ratio,
                                ParamFormat format) {
  float low = values[0];
  float high = values[0];
  for (const float v : values) {
    low = std::min(low, v);
    high = std::max(high, v);
  }
  low *= clip_ratio;
  high *= clip_ratio;
  const float levels = float((1 << bits) - 1);
  GroupParams params;
  params.zero = round_param(low, format);
  params.scale = round_param((high - low) / levels, format);
  // A constant group (or one whose range underflows the format) still needs a usable scale.
  if (!(params.scale > 0.0f)) params.scale = round_param(1e-6f, format);
  return params;
}

void quantize_group(std::span<const float> values, GroupParams params, int bits, uint8_t* codes) {
  const int max_code = (1 << bits) - 1;
  std::memset(codes, 0, size_t(packed_bytes(int(values.size()), bits)));
  for (size_t i = 0; i < values.size(); ++i) {
    const float scaled = std::nearbyint((values[i] - params.zero) / params.scale);
    const int code = int(std::clamp(scaled, 0.0f, float(max_code)));
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
  const uint16_t encoded[2] = {encode_param(params.scale, format), encode_param(params.zero, format)};
  std::memcpy(out, encoded, sizeof(encoded));
}

GroupParams load_params(const uint8_t* in, ParamFormat format) {
  uint16_t encoded[2];
  std::memcpy(encoded, in, sizeof(encoded));
  return {decode_param(encoded[0], format), decode_param(encoded[1], format)};
}

}  // namespace oscar
