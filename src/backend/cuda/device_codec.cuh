#pragma once
// The quantization codec of quant/group_codec.h on the device, operation for operation, so the
// GPU writes the same codes and parameters as the CPU reference for the same bf16 inputs:
//   clip lo = c * min, hi = c * max; scale = (hi - lo) / (2^bits - 1) and zero = lo rounded to the
//   parameter format; code = clamp(rint((x - zero) / scale), 0, 2^bits - 1).
// q8 scales come from a 256-entry table filled on the host by q8_scale() (exact same floats); f32
// parameters (the published serving configuration's) are stored as they are computed.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "quant/group_codec.h"

namespace oscar::cuda {

struct DeviceParams {
  float scale;
  float zero;
};

__device__ __forceinline__ float round_to_format(float value, ParamFormat format) {
  return format == ParamFormat::f16 ? __half2float(__float2half_rn(value))
                                    : __bfloat162float(__float2bfloat16_rn(value));
}

__device__ __forceinline__ int q8_zero_code(float zero, float scale) {
  return int(fminf(fmaxf(rintf(zero * 16.0f / scale), -128.0f), 127.0f));
}

// params_for_range (group_codec.cpp).
__device__ inline DeviceParams params_for_range(float lo, float hi, int bits, ParamFormat format,
                                                const float* q8_scales) {
  const float levels = float((1 << bits) - 1);
  if (format == ParamFormat::q8) {
    const float wanted = fmaxf((hi - lo) / levels, 1e-30f);
    const double exponent = ceil(12.0 * (log2(double(wanted)) + 12.0) - 1e-9);
    int e = int(fmin(fmax(exponent, 0.0), 255.0));
    while (e < 255 && fabsf(lo * 16.0f / q8_scales[e]) > 127.5f) ++e;
    const float scale = q8_scales[e];
    return {scale, float(q8_zero_code(lo, scale)) * scale / 16.0f};
  }
  if (format == ParamFormat::f32) {
    DeviceParams params{(hi - lo) / levels, lo};
    if (!(params.scale > 0.0f)) params.scale = 1e-6f;
    return params;
  }
  DeviceParams params{round_to_format((hi - lo) / levels, format), round_to_format(lo, format)};
  if (!(params.scale > 0.0f)) params.scale = round_to_format(1e-6f, format);
  return params;
}

__device__ __forceinline__ int quantize_code(float x, DeviceParams p, int bits) {
  const float scaled = rintf((x - p.zero) / p.scale);
  return int(fminf(fmaxf(scaled, 0.0f), float((1 << bits) - 1)));
}

// store_params / load_params: f16 and bf16 as (scale, zero) 16-bit pairs; q8 as (exponent, zero);
// f32 as two floats (4-byte aligned: two word accesses).
__device__ inline void store_params(DeviceParams p, ParamFormat format, const float* q8_scales,
                                    uint8_t* out) {
  if (format == ParamFormat::q8) {
    const int e = int(fminf(fmaxf(rintf(12.0f * (log2f(p.scale) + 12.0f)), 0.0f), 255.0f));
    out[0] = uint8_t(e);
    out[1] = uint8_t(int8_t(q8_zero_code(p.zero, q8_scales[e])));
    return;
  }
  if (format == ParamFormat::f32) {
    reinterpret_cast<float*>(out)[0] = p.scale;
    reinterpret_cast<float*>(out)[1] = p.zero;
    return;
  }
  uint16_t scale_bits, zero_bits;
  if (format == ParamFormat::f16) {
    scale_bits = __half_as_ushort(__float2half_rn(p.scale));
    zero_bits = __half_as_ushort(__float2half_rn(p.zero));
  } else {
    scale_bits = __bfloat16_as_ushort(__float2bfloat16_rn(p.scale));
    zero_bits = __bfloat16_as_ushort(__float2bfloat16_rn(p.zero));
  }
  *reinterpret_cast<uint32_t*>(out) = uint32_t(scale_bits) | (uint32_t(zero_bits) << 16);
}

// A q8 pair as stored (exponent in the low byte, zero code in the high byte), decoded.
__device__ __forceinline__ DeviceParams decode_q8_params(uint32_t pair, const float* q8_scales) {
  const float scale = q8_scales[pair & 0xffu];
  return {scale, float(int8_t(pair >> 8)) * scale / 16.0f};
}

template <ParamFormat Format>
__device__ __forceinline__ DeviceParams load_params(const uint8_t* in, const float* q8_scales) {
  if constexpr (Format == ParamFormat::q8) {
    return decode_q8_params(*reinterpret_cast<const uint16_t*>(in), q8_scales);
  }
  if constexpr (Format == ParamFormat::f32) {
    return {reinterpret_cast<const float*>(in)[0], reinterpret_cast<const float*>(in)[1]};
  }
  const uint32_t bits = *reinterpret_cast<const uint32_t*>(in);
  if constexpr (Format == ParamFormat::f16) {
    return {__half2float(__ushort_as_half(uint16_t(bits))),
            __half2float(__ushort_as_half(uint16_t(bits >> 16)))};
  }
  return {__uint_as_float(bits << 16), __uint_as_float(bits & 0xffff0000u)};
}

__device__ __forceinline__ DeviceParams load_params(const uint8_t* in, ParamFormat format,
                                                    const float* q8_scales) {
  if (format == ParamFormat::q8) return load_params<ParamFormat::q8>(in, q8_scales);
  if (format == ParamFormat::f16) return load_params<ParamFormat::f16>(in, q8_scales);
  if (format == ParamFormat::f32) return load_params<ParamFormat::f32>(in, q8_scales);
  return load_params<ParamFormat::bf16>(in, q8_scales);
}

__device__ __forceinline__ int code_at(const uint8_t* codes, int index, int bits) {
  const int bit = index * bits;
  return (codes[bit / 8] >> (bit % 8)) & ((1 << bits) - 1);
}

}  // namespace oscar::cuda
