#pragma once
// bf16 and fp16 <-> float conversions, bit-exact with PyTorch (round to nearest even; NaN kept).
#include <bit>
#include <cstdint>
#include <cstring>

namespace oscar {

inline float bf16_to_float(uint16_t bits) {
  return std::bit_cast<float>(uint32_t(bits) << 16);
}

inline uint16_t float_to_bf16(float value) {
  uint32_t bits = std::bit_cast<uint32_t>(value);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return uint16_t((bits >> 16) | 0x40);  // quiet NaN
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return uint16_t(bits >> 16);
}

inline float round_to_bf16(float value) {
  return bf16_to_float(float_to_bf16(value));
}

float fp16_to_float(uint16_t bits);
uint16_t float_to_fp16(float value);

inline float round_to_fp16(float value) {
  return fp16_to_float(float_to_fp16(value));
}

}  // namespace oscar
