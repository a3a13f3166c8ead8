// Residual add fused with RMSNorm. Mirrors `hidden[i] += projected[i]` and rms_norm
// (backend/cpu/cpu_math.cpp): y = weight * (x * (1 / sqrt(mean(x^2) + eps))), in float; the output
// is the next matrix product's bf16 input.
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/layer_kernels.h"

namespace oscar::cuda {
namespace {

constexpr int kThreads = 256;

__device__ float block_sum(float value, float* scratch) {
  for (int offset = 16; offset > 0; offset /= 2) value += __shfl_xor_sync(0xffffffffu, value, offset);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) scratch[warp] = value;
  __syncthreads();
  float total = 0.0f;
  for (int w = 0; w < kThreads / 32; ++w) total += scratch[w];
  return total;
}

__global__ void add_rms_norm_kernel(float* hidden, const float* delta, const int32_t* row_map, int64_t width,
                                    const float* weight, float eps, __nv_bfloat16* out) {
  __shared__ float scratch[kThreads / 32];
  const int64_t row = row_map != nullptr ? row_map[blockIdx.x] : blockIdx.x;
  float* x = hidden + row * width;
  const float* d = delta != nullptr ? delta + row * width : nullptr;
  float sum = 0.0f;
  for (int64_t i = threadIdx.x; i < width; i += kThreads) {
    float value = x[i];
    if (d != nullptr) {
      value += d[i];
      x[i] = value;
    }
    sum += value * value;
  }
  const float inverse = 1.0f / sqrtf(block_sum(sum, scratch) / float(width) + eps);
  __nv_bfloat16* y = out + int64_t(blockIdx.x) * width;
  for (int64_t i = threadIdx.x; i < width; i += kThreads) y[i] = __float2bfloat16_rn(weight[i] * (x[i] * inverse));
}

}  // namespace

void launch_add_rms_norm(float* hidden, const float* delta, const int32_t* row_map, int64_t rows,
                         int64_t width, const float* weight, float eps, __nv_bfloat16* out,
                         cudaStream_t stream) {
  if (rows == 0) return;
  add_rms_norm_kernel<<<unsigned(rows), kThreads, 0, stream>>>(hidden, delta, row_map, width, weight, eps, out);
  check_launch("add_rms_norm_kernel");
}

}  // namespace oscar::cuda
