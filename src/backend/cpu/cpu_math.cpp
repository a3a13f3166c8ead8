#include "backend/cpu/cpu_math.h"

#include <omp.h>

#include <algorithm>
#include <cmath>

#include "backend/cpu/simd.h"
#include "util/error.h"

namespace oscar {
CpuMatrix CpuMatrix::from_tensor(const TensorView& tensor) {
  CpuMatrix m;
  m.rows = tensor.shape.at(0);
  m.cols = tensor.shape.size() > 1 ? tensor.shape[1] : 1;
  m.values = to_float_vector(tensor);
  return m;
}

CpuMatrix CpuMatrix::rows_slice(int64_t first, int64_t count) const {
  require(first >= 0 && count >= 0 && first + count <= rows, "rows {}..{} of a {} x {} matrix",
          first, first + count - 1, rows, cols);
  CpuMatrix m;
  m.rows = count;
  m.cols = cols;
  m.values.assign(values.begin() + first * cols, values.begin() + (first + count) * cols);
  return m;
}

CpuMatrix CpuMatrix::columns_slice(int64_t first, int64_t count) const {
  require(first >= 0 && count >= 0 && first + count <= cols, "columns {}..{} of a {} x {} matrix",
          first, first + count - 1, rows, cols);
  CpuMatrix m;
  m.rows = rows;
  m.cols = count;
  m.values.resize(size_t(rows * count));
  for (int64_t r = 0; r < rows; ++r) {
    std::copy_n(values.begin() + r * cols + first, count, m.values.begin() + r * count);
  }
  return m;
}

namespace {

// Register tiles of the linear kernel: each output is one simd::dot-style fma chain over the input
// (16 lanes, then the fixed lane tree), so the tile shape changes speed, never results.
#if defined(__AVX512F__)
constexpr int64_t kTileTokens = 4;
#else
constexpr int64_t kTileTokens = 2;
#endif
constexpr int64_t kTileOutputs = 4;
constexpr int64_t kOutputBlock = 64;  // weight rows a thread keeps hot while it sweeps the tokens

template <int64_t Tokens, int64_t Outputs>
void linear_tile(const float* x, int64_t x_stride, const float* w, int64_t w_stride, int64_t k,
                 float* y, int64_t y_stride) {
  simd::Vec16 acc[Tokens][Outputs];
  for (auto& row : acc)
    for (auto& a : row) a = simd::Vec16::zero();
  for (int64_t i = 0; i < k; i += 16) {
    simd::Vec16 weights[Outputs];
    for (int64_t o = 0; o < Outputs; ++o) weights[o] = simd::Vec16::load(w + o * w_stride + i);
    for (int64_t t = 0; t < Tokens; ++t) {
      const simd::Vec16 input = simd::Vec16::load(x + t * x_stride + i);
      for (int64_t o = 0; o < Outputs; ++o) acc[t][o].fma(input, weights[o]);
    }
  }
  for (int64_t t = 0; t < Tokens; ++t)
    for (int64_t o = 0; o < Outputs; ++o) y[t * y_stride + o] = acc[t][o].sum();
}

void linear_block(const float* x, int64_t tokens, const CpuMatrix& w, int64_t first_output,
                  int64_t outputs, float* y) {
  const int64_t k = w.cols;
  const int64_t n = w.rows;
  for (int64_t t = 0; t < tokens; t += kTileTokens) {
    const bool full_tokens = t + kTileTokens <= tokens;
    for (int64_t o = first_output; o < first_output + outputs; o += kTileOutputs) {
      const float* w_tile = w.values.data() + o * k;
      if (full_tokens && o + kTileOutputs <= first_output + outputs) {
        linear_tile<kTileTokens, kTileOutputs>(x + t * k, k, w_tile, k, k, y + t * n + o, n);
        continue;
      }
      for (int64_t tt = t; tt < std::min(tokens, t + kTileTokens); ++tt) {
        for (int64_t oo = o; oo < std::min(first_output + outputs, o + kTileOutputs); ++oo) {
          linear_tile<1, 1>(x + tt * k, k, w.values.data() + oo * k, k, k, y + tt * n + oo, n);
        }
      }
    }
  }
}

}  // namespace

void linear(const float* x, int64_t tokens, const CpuMatrix& w, float* y) {
  const int64_t blocks = (w.rows + kOutputBlock - 1) / kOutputBlock;
#pragma omp parallel for schedule(static)
  for (int64_t b = 0; b < blocks; ++b) {
    const int64_t first = b * kOutputBlock;
    linear_block(x, tokens, w, first, std::min(kOutputBlock, w.rows - first), y);
  }
}

void rms_norm(const float* x, int64_t rows, int64_t width, const float* weight, double eps,
              float* y) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* in = x + r * width;
    float* out = y + r * width;
    float sum = 0;
    for (int64_t i = 0; i < width; ++i) sum += in[i] * in[i];
    const float inverse = 1.0f / std::sqrt(sum / float(width) + float(eps));
    for (int64_t i = 0; i < width; ++i) out[i] = weight[i] * (in[i] * inverse);
  }
}

void swiglu(const float* gate, const float* up, int64_t count, float* out) {
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < count; ++i) {
    const float g = gate[i];
    out[i] = g / (1.0f + std::exp(-g)) * up[i];
  }
}

void rotate_rows(float* x, int64_t rows, int64_t row_stride, const float* rotation,
                 int64_t head_dim) {
  // out[j] = sum_i x[i] R[i][j]: sixteen columns per fma chain over i (batch-invariant).
  std::vector<float> out(static_cast<size_t>(head_dim));
  for (int64_t r = 0; r < rows; ++r) {
    float* row = x + r * row_stride;
    for (int64_t j = 0; j < head_dim; j += 16) {
      simd::Vec16 acc = simd::Vec16::zero();
      for (int64_t i = 0; i < head_dim; ++i) {
        acc.fma(simd::Vec16::broadcast(row[i]), simd::Vec16::load(rotation + i * head_dim + j));
      }
      acc.store(&out[size_t(j)]);
    }
    std::copy(out.begin(), out.end(), row);
  }
}

}  // namespace oscar
