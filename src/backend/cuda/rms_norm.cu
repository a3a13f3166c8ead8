// Residual add fused with RMSNorm. Mirrors `hidden[i] += projected[i]` and rms_norm
// (backend/cpu/cpu_math.cpp): y = weight * (x * (1 / sqrt(mean(x^2) + eps))), in float; the output
// is the next matrix product's bf16 input.
//
// A decode step has a handful of rows, so one block per row is all the parallelism there is and
// the kernel's time is its latency: every thread issues all of its 16-byte loads (row, delta and
// weight) before it waits on any, and keeps the row in registers for the second pass, rather than
// a loop of 4-byte loads, one round trip after another.
#include <stdexcept>
#include <string>

#include "backend/cuda/chained_launch.cuh"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/layer_kernels.h"
#include "backend/cuda/warp_primitives.cuh"

namespace oscar::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kMaxVectorsPerThread = 16;  // rows of up to 16384 floats

__device__ float block_sum(float value, float* scratch) {
  for (int offset = 16; offset > 0; offset /= 2)
    value += __shfl_xor_sync(0xffffffffu, value, offset);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) scratch[warp] = value;
  __syncthreads();
  float total = 0.0f;
#pragma unroll
  for (int w = 0; w < kThreads / 32; ++w) total += scratch[w];
  return total;
}

// kVectors: float4s per thread, enough to cover the row (width / 4 <= kVectors * kThreads).
template <int kVectors>
__global__ void __launch_bounds__(kThreads)
    add_rms_norm_kernel(float* __restrict__ hidden, const float* __restrict__ delta,
                        const int32_t* __restrict__ row_map, int width,
                        const float* __restrict__ weight, float eps,
                        __nv_bfloat16* __restrict__ out) {
  __shared__ float scratch[kThreads / 32];
  const auto* w = reinterpret_cast<const float4*>(weight);
  const int vectors = width / 4;
  float4 v[kVectors], e[kVectors], scale[kVectors];
#pragma unroll
  for (int k = 0; k < kVectors; ++k) {
    const int i = threadIdx.x + k * kThreads;
    if (i < vectors) scale[k] = w[i];
  }
  wait_for_producer();
  release_consumer();
  const int64_t row = row_map != nullptr ? row_map[blockIdx.x] : blockIdx.x;
  auto* x = reinterpret_cast<float4*>(hidden + row * width);
  const auto* d = reinterpret_cast<const float4*>(delta != nullptr ? delta + row * width : nullptr);
#pragma unroll
  for (int k = 0; k < kVectors; ++k) {
    const int i = threadIdx.x + k * kThreads;
    if (i < vectors) {
      v[k] = x[i];
      e[k] = d != nullptr ? d[i] : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    }
  }
  float sum = 0.0f;
#pragma unroll
  for (int k = 0; k < kVectors; ++k) {
    const int i = threadIdx.x + k * kThreads;
    if (i >= vectors) continue;
    if (d != nullptr) {
      v[k] = make_float4(v[k].x + e[k].x, v[k].y + e[k].y, v[k].z + e[k].z, v[k].w + e[k].w);
      x[i] = v[k];
    }
    sum += v[k].x * v[k].x + v[k].y * v[k].y + v[k].z * v[k].z + v[k].w * v[k].w;
  }
  const float inverse = 1.0f / sqrtf(block_sum(sum, scratch) / float(width) + eps);
  auto* y = reinterpret_cast<uint2*>(out + int64_t(blockIdx.x) * width);
#pragma unroll
  for (int k = 0; k < kVectors; ++k) {
    const int i = threadIdx.x + k * kThreads;
    if (i >= vectors) continue;
    const __nv_bfloat162 low =
        __floats2bfloat162_rn(scale[k].x * (v[k].x * inverse), scale[k].y * (v[k].y * inverse));
    const __nv_bfloat162 high =
        __floats2bfloat162_rn(scale[k].z * (v[k].z * inverse), scale[k].w * (v[k].w * inverse));
    y[i] = make_uint2(*reinterpret_cast<const uint32_t*>(&low),
                      *reinterpret_cast<const uint32_t*>(&high));
  }
}

template <int kVectors>
void launch(float* hidden, const float* delta, const int32_t* row_map, int64_t rows, int width,
            const float* weight, float eps, __nv_bfloat16* out, cudaStream_t stream) {
  if (width / 4 > kVectors * kThreads) {
    if constexpr (kVectors < kMaxVectorsPerThread) {
      launch<kVectors * 2>(hidden, delta, row_map, rows, width, weight, eps, out, stream);
    }
    return;
  }
  launch_chained("add_rms_norm_kernel", add_rms_norm_kernel<kVectors>, dim3(unsigned(rows)),
                 dim3(kThreads), 0, stream, hidden, delta, row_map, width, weight, eps, out);
}

}  // namespace

void launch_add_rms_norm(float* hidden, const float* delta, const int32_t* row_map, int64_t rows,
                         int64_t width, const float* weight, float eps, __nv_bfloat16* out,
                         cudaStream_t stream) {
  if (rows == 0) return;
  if (width % 4 != 0 || width > 4 * kMaxVectorsPerThread * kThreads) {
    throw std::invalid_argument("add + RMSNorm: hidden size " + std::to_string(width) +
                                " is not supported (a multiple of 4, at most 16384)");
  }
  launch<1>(hidden, delta, row_map, rows, int(width), weight, eps, out, stream);
}

}  // namespace oscar::cuda
