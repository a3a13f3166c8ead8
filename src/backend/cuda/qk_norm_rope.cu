// Per-head q/k RMSNorm and rotary embedding, in place. Mirrors CpuBackend::apply_qk_norm_and_rope
// (backend/cpu/cpu_backend.cpp) with rms_norm (cpu_math.cpp) and rope_cos_sin / apply_rope
// (model/rope.cpp): angle = float(position) * inv_freq, cos and sin taken in double then rounded to
// float, x[i] and x[i + D/2] rotated by that angle ("rotate half").
#include <string>

#include "backend/cuda/chained_launch.cuh"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/layer_kernels.h"
#include "backend/cuda/warp_primitives.cuh"

namespace oscar::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kMaxHalf = 128;     // head_dim up to 256
constexpr int64_t kFewRows = 64;  // a decode step's rows

// A block per row, or in a step of few rows a block per (row, 8 heads), so that a decode step's
// rows still spread over many blocks: the row's cos and sin, once for the block's heads (taken per
// head, their double sincos was most of the kernel's time), then a warp per head, lane l holding
// the pairs (i, i + D/2) of i = l, l + 32, ... The norm's sum is added in the order of the kernel
// before it (a tree over the lanes for each 32 pairs, then the partial sums in order); where nvcc
// fuses a product into an add may still differ, so the last bit of a result may too.
__global__ void __launch_bounds__(kThreads) qk_norm_rope_kernel(const QkNormRopeArgs args) {
  __shared__ float cos_values[kMaxHalf], sin_values[kMaxHalf];
  const int row = blockIdx.x;
  const int half = args.head_dim / 2, pairs_per_lane = half / 32;
  wait_for_producer();
  release_consumer();
  const float position = float(args.rows[row].position);
  for (int i = threadIdx.x; i < half; i += kThreads) {
    const float angle = position * args.inverse_frequencies[i];
    double sin_value, cos_value;
    sincos(double(angle), &sin_value, &cos_value);
    cos_values[i] = float(cos_value);
    sin_values[i] = float(sin_value);
  }
  __syncthreads();
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int heads_per_block = kThreads / 32;
  for (int head = int(blockIdx.y) * heads_per_block + warp;
       head < args.num_heads + args.num_kv_heads; head += int(gridDim.y) * heads_per_block) {
    float* x = args.qkv + int64_t(row) * args.row_stride + int64_t(head) * args.head_dim;
    const float* weight = head < args.num_heads ? args.q_norm : args.k_norm;
    float inverse = 0.0f;
    if (weight != nullptr) {
      float sum = 0.0f;
      for (int k = 0; k < pairs_per_lane; ++k) {
        const int i = lane + 32 * k;
        float partial = x[i] * x[i] + x[i + half] * x[i + half];
        for (int offset = 16; offset > 0; offset /= 2)
          partial += __shfl_xor_sync(0xffffffffu, partial, offset);
        sum += partial;
      }
      inverse = 1.0f / sqrtf(sum / float(args.head_dim) + args.eps);
    }
    for (int k = 0; k < pairs_per_lane; ++k) {
      const int i = lane + 32 * k;
      float first = x[i], second = x[i + half];
      if (weight != nullptr) {
        first = weight[i] * (first * inverse);
        second = weight[i + half] * (second * inverse);
      }
      const float c = cos_values[i], s = sin_values[i];
      x[i] = first * c - second * s;
      x[i + half] = second * c + first * s;
    }
  }
}

}  // namespace

void launch_qk_norm_rope(const QkNormRopeArgs& args, int64_t rows, cudaStream_t stream) {
  if (rows == 0) return;
  require_launch(args.head_dim % 64 == 0 && args.head_dim / 2 <= kMaxHalf,
                 "qk norm and rope: head_dim " + std::to_string(args.head_dim) +
                     " (supported: a multiple of 64, at most " + std::to_string(2 * kMaxHalf) +
                     ")");
  // Prefill rows: a block per row takes cos and sin once per row. Few rows: a block per 8 heads.
  const int head_blocks =
      rows > kFewRows ? 1
                      : (args.num_heads + args.num_kv_heads + kThreads / 32 - 1) / (kThreads / 32);
  launch_chained("qk_norm_rope_kernel", qk_norm_rope_kernel,
                 dim3(unsigned(rows), unsigned(head_blocks)), dim3(kThreads), 0, stream, args);
}

}  // namespace oscar::cuda
