// Per-head q/k RMSNorm and rotary embedding, in place. Mirrors CpuBackend::apply_qk_norm_and_rope
// (backend/cpu/cpu_backend.cpp) with rms_norm (cpu_math.cpp) and rope_cos_sin / apply_rope
// (model/rope.cpp): angle = float(position) * inv_freq, cos and sin taken in double then rounded to
// float, x[i] and x[i + D/2] rotated by that angle ("rotate half").
#include "backend/cuda/chained_launch.cuh"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/layer_kernels.h"
#include "backend/cuda/warp_primitives.cuh"

namespace oscar::cuda {
namespace {

// One block per (row, head); thread i holds the pair (i, i + D/2).
__global__ void qk_norm_rope_kernel(const QkNormRopeArgs args) {
  __shared__ float partial[32];
  const int row = blockIdx.x, head = blockIdx.y;
  const int half = args.head_dim / 2;
  const int i = threadIdx.x;
  wait_for_producer();
  release_consumer();
  float* x = args.qkv + int64_t(row) * args.row_stride + int64_t(head) * args.head_dim;
  float first = x[i], second = x[i + half];
  const bool is_query = head < args.num_heads;
  const float* weight = is_query ? args.q_norm : args.k_norm;
  if (weight != nullptr) {
    float sum = first * first + second * second;
    for (int offset = 16; offset > 0; offset /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, offset);
    if (i % 32 == 0) partial[i / 32] = sum;
    __syncthreads();
    sum = 0.0f;
    for (int w = 0; w < half / 32; ++w) sum += partial[w];
    const float inverse = 1.0f / sqrtf(sum / float(args.head_dim) + args.eps);
    first = weight[i] * (first * inverse);
    second = weight[i + half] * (second * inverse);
  }
  const float angle = float(args.rows[row].position) * args.inverse_frequencies[i];
  double sin_value, cos_value;
  sincos(double(angle), &sin_value, &cos_value);
  const float c = float(cos_value), s = float(sin_value);
  x[i] = first * c - second * s;
  x[i + half] = second * c + first * s;
}

}  // namespace

void launch_qk_norm_rope(const QkNormRopeArgs& args, int64_t rows, cudaStream_t stream) {
  if (rows == 0) return;
  const dim3 grid(unsigned(rows), unsigned(args.num_heads + args.num_kv_heads));
  launch_chained("qk_norm_rope_kernel", qk_norm_rope_kernel, grid,
                 dim3(unsigned(args.head_dim / 2)), 0, stream, args);
}

}  // namespace oscar::cuda
