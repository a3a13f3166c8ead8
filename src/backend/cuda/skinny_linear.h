#pragma once
// Linear layers of 1-32 rows (decode steps of batch 1-32), where the time is the weight read:
// y[rows][outputs] = x[rows][inputs] * w^T (+ y), bf16 inputs, float accumulation and output.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace oscar::cuda {

// Whether skinny_linear serves this shape (otherwise cuBLAS does).
bool skinny_linear_supports(int64_t rows, int64_t inputs);

void skinny_linear(const __nv_bfloat16* x, int64_t rows, const __nv_bfloat16* w, int64_t outputs,
                   int64_t inputs, float* y, bool accumulate, cudaStream_t stream);

// The gate|up product, w [2 inner][inputs] with its rows as gate_up_layout.h orders them, and
// SwiGLU applied: activation[rows][inner] = bf16(silu(gate) * up), as swiglu.cu computes it from
// skinny_linear's output (the same sums, to the bit).
void skinny_linear_swiglu(const __nv_bfloat16* x, int64_t rows, const __nv_bfloat16* w,
                          int64_t inner, int64_t inputs, __nv_bfloat16* activation,
                          cudaStream_t stream);

}  // namespace oscar::cuda
