#pragma once
// The dense math of the CPU reference: float32 matrices (weights converted from bf16/fp16 at
// load), batch-invariant matrix products (simd.h) split over OpenMP threads by output rows,
// RMSNorm and SwiGLU.
#include <cstdint>
#include <vector>

#include "format/tensor.h"

namespace oscar {

// A row-major [rows, cols] float32 matrix; as a linear layer's weight, rows = outputs.
struct CpuMatrix {
  int64_t rows = 0;
  int64_t cols = 0;
  std::vector<float> values;

  static CpuMatrix from_tensor(const TensorView& tensor);
  // Rows [first, first + count) or columns [first, first + count): a tensor-parallel shard of a
  // column-parallel (rows = outputs) or row-parallel (columns = inputs) weight.
  CpuMatrix rows_slice(int64_t first, int64_t count) const;
  CpuMatrix columns_slice(int64_t first, int64_t count) const;
};

// y[t][o] = sum_i x[t][i] * w[o][i] for t < tokens (y has w.rows columns; w.cols a multiple of 16).
// Each y[t][o] depends only on x[t] and w[o]: the same bits for any number of tokens.
void linear(const float* x, int64_t tokens, const CpuMatrix& w, float* y);

// Rows of length `width`: y = x / sqrt(mean(x^2) + eps) * weight (transformers' RMSNorm in
// float32).
void rms_norm(const float* x, int64_t rows, int64_t width, const float* weight, double eps,
              float* y);

// out[i] = silu(gate[i]) * up[i].
void swiglu(const float* gate, const float* up, int64_t count, float* out);

// x_r = x_r R for `rows` rows of head_dim values, row r starting at x + r * row_stride;
// R is D x D row-major (a row vector times R, as the OSCAR spec writes it).
void rotate_rows(float* x, int64_t rows, int64_t row_stride, const float* rotation,
                 int64_t head_dim);

}  // namespace oscar
