#pragma once
// Linear layers: bf16 weights and activations, float32 accumulation and output (the residual
// stream stays float32). Up to 32 rows (decode steps of batch 1-32) through skinny_linear.h, more
// through cuBLAS: one handle on the backend's stream, with a fixed workspace so that the
// calls can be captured into a CUDA graph.
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "backend/cuda/device_buffer.h"

namespace oscar::cuda {

class Gemm {
 public:
  explicit Gemm(cudaStream_t stream);
  ~Gemm();
  Gemm(const Gemm&) = delete;
  Gemm& operator=(const Gemm&) = delete;

  // y[rows][outputs] = x[rows][inputs] * w^T with w [outputs][inputs] row-major (a checkpoint's
  // nn.Linear weight); `accumulate` adds to y instead.
  void linear(const __nv_bfloat16* x, int64_t rows, const __nv_bfloat16* w, int64_t outputs,
              int64_t inputs, float* y, bool accumulate = false) const;
  // The MLP's gate|up product, w [2 inner][inputs] (rows as gate_up_layout.h orders them), then
  // SwiGLU: activation[rows][inner] as bf16. Up to 32 rows in one kernel; more through cuBLAS into
  // gate_up [rows][2 inner], then the SwiGLU kernel.
  void linear_swiglu(const __nv_bfloat16* x, int64_t rows, const __nv_bfloat16* w, int64_t inner,
                     int64_t inputs, float* gate_up, __nv_bfloat16* activation) const;
  // The same product through cuBLAS whatever the rows (`oscar bench linear` compares the two).
  void cublas_linear(const __nv_bfloat16* x, int64_t rows, const __nv_bfloat16* w, int64_t outputs,
                     int64_t inputs, float* y, bool accumulate = false) const;
  // linear_swiglu's path beyond 32 rows whatever the rows: cuBLAS, then the SwiGLU kernel.
  void cublas_linear_swiglu(const __nv_bfloat16* x, int64_t rows, const __nv_bfloat16* w,
                            int64_t inner, int64_t inputs, float* gate_up,
                            __nv_bfloat16* activation) const;

 private:
  cublasHandle_t handle_ = nullptr;
  cudaStream_t stream_ = nullptr;
  DeviceBuffer<std::byte> workspace_;
};

}  // namespace oscar::cuda
