#include "util/half.h"

#include <cmath>

namespace oscar {

float fp16_to_float(uint16_t bits) {
  const uint32_t sign = uint32_t(bits & 0x8000u) << 16;
  const uint32_t exponent = (bits >> 10) & 0x1fu;
  const uint32_t mantissa = bits & 0x3ffu;
  if (exponent == 0) {
    // Subnormal or zero: value = mantissa * 2^-24.
    const float magnitude = std::ldexp(float(mantissa), -24);
    return sign ? -magnitude : magnitude;
  }
  if (exponent == 31) return std::bit_cast<float>(sign | 0x7f800000u | (mantissa << 13));
  return std::bit_cast<float>(sign | ((exponent + 112) << 23) | (mantissa << 13));
}

uint16_t float_to_fp16(float value) {
  const uint32_t bits = std::bit_cast<uint32_t>(value);
  const uint16_t sign = uint16_t((bits >> 16) & 0x8000u);
  const uint32_t magnitude = bits & 0x7fffffffu;
  if (magnitude > 0x7f800000u) return uint16_t(sign | 0x7e00u);   // NaN
  if (magnitude >= 0x477ff000u) return uint16_t(sign | 0x7c00u);  // overflow to infinity
  if (magnitude < 0x38800000u) {
    // Result is subnormal in fp16: round value / 2^-24 to the nearest integer (ties to even).
    const float scaled = std::bit_cast<float>(magnitude) * 16777216.0f;
    return uint16_t(sign | uint16_t(std::nearbyint(scaled)));
  }
  // Normal: rebias the exponent and round the mantissa from 23 to 10 bits, ties to even.
  uint32_t rebased = magnitude - (112u << 23);
  rebased += 0xfffu + ((rebased >> 13) & 1u);
  return uint16_t(sign | uint16_t(rebased >> 13));
}

}  // namespace oscar
