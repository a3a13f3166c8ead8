#pragma once
// SwiGLU of one pair as swiglu (backend/cpu/cpu_math.cpp) computes it, silu(gate) * up =
// gate / (1 + exp(-gate)) * up, rounded once to bf16 (down_proj's input). The SwiGLU kernel
// (swiglu.cu) and the few-rows gate|up product that applies it itself (skinny_linear.cu) share it.
#include <cuda_bf16.h>

namespace oscar::cuda {

__device__ __forceinline__ __nv_bfloat16 swiglu_bf16(float gate, float up) {
  return __float2bfloat16_rn(gate / (1.0f + expf(-gate)) * up);
}

}  // namespace oscar::cuda
