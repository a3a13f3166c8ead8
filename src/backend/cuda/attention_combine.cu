// Merges split attention results. Mirrors the softmax normalisation at the end of cpu_attention
// (backend/cpu/cpu_attention.cpp): the splits' maxima are reconciled (log-sum-exp), then the
// weighted values are divided by the total weight.
#include "backend/cuda/attention_combine.h"

#include <algorithm>

#include "backend/cuda/cuda_check.h"

namespace oscar::cuda {
namespace {

constexpr int kThreadsPerHead = 128;
constexpr int kMaxThreads = 1024;

// Sum (or max) over the 128 threads of one query head: four warps, through `scratch[4]`.
template <bool Max>
__device__ float reduce_head(float value, float* scratch) {
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) {
    const float other = __shfl_xor_sync(0xffffffffu, value, offset);
    value = Max ? fmaxf(value, other) : value + other;
  }
  const int warp = (threadIdx.x % kThreadsPerHead) / 32;
  __syncwarp();
  if ((threadIdx.x & 31) == 0) scratch[warp] = value;
  // The head's four warps meet here; blocks are whole heads, so every thread of the block does.
  __syncthreads();
  value = Max ? fmaxf(fmaxf(scratch[0], scratch[1]), fmaxf(scratch[2], scratch[3]))
              : scratch[0] + scratch[1] + scratch[2] + scratch[3];
  __syncthreads();
  return value;
}

// One block per (row, KV head), 128 threads per query head of the group (up to 8 heads at once).
// A row can have hundreds of splits at batch 1: the maxima and sums are reduced by all of the
// head's threads together, then each thread (one channel) sums the splits' values with its loads
// independent of each other, so that they overlap.
__global__ void attention_combine_kernel(const CombineTask* tasks, const float* partials, int num_kv_heads,
                                         int group, int head_dim, __nv_bfloat16* out, float* out_float) {
  __shared__ float scratch[kMaxThreads / kThreadsPerHead][4];
  const int row = blockIdx.x / num_kv_heads, kv_head = blockIdx.x % num_kv_heads;
  const CombineTask task = tasks[row];
  const int64_t record_floats = int64_t(group) * (head_dim + 2);
  const float* first = partials + int64_t(task.first + kv_head) * record_floats;
  const int64_t stride = int64_t(task.stride) * record_floats;
  const int heads_at_once = int(blockDim.x) / kThreadsPerHead;
  const int lane = int(threadIdx.x) % kThreadsPerHead;
  const int rounds = (group + heads_at_once - 1) / heads_at_once;
  for (int round = 0; round < rounds; ++round) {
    const int g = round * heads_at_once + int(threadIdx.x) / kThreadsPerHead;
    const bool active = g < group;
    float* mine = scratch[threadIdx.x / kThreadsPerHead];
    float max = -INFINITY;
    for (int s = lane; active && s < task.count; s += kThreadsPerHead) max = fmaxf(max, first[s * stride + g]);
    max = reduce_head<true>(max, mine);
    float sum = 0.0f;
    for (int s = lane; active && s < task.count; s += kThreadsPerHead) {
      const float* record = first + s * stride;
      sum += record[group + g] * exp2f(record[g] - max);
    }
    sum = reduce_head<false>(sum, mine);
    if (!active) continue;
    for (int ch = lane; ch < head_dim; ch += kThreadsPerHead) {
      float value = 0.0f;
#pragma unroll 4
      for (int s = 0; s < task.count; ++s) {
        const float* record = first + s * stride;
        value += record[2 * group + g * head_dim + ch] * exp2f(record[g] - max);
      }
      const float result = value / sum;
      const int64_t index = (int64_t(row) * num_kv_heads * group + int64_t(kv_head) * group + g) * head_dim + ch;
      out[index] = __float2bfloat16_rn(result);
      if (out_float != nullptr) out_float[index] = result;
    }
  }
}

}  // namespace

void launch_attention_combine(const CombineTask* tasks, int64_t rows, const float* partials,
                              int num_kv_heads, int group, int head_dim, __nv_bfloat16* out,
                              float* out_float, cudaStream_t stream) {
  if (rows == 0) return;
  const int threads = std::min(group, kMaxThreads / kThreadsPerHead) * kThreadsPerHead;
  attention_combine_kernel<<<unsigned(rows * num_kv_heads), unsigned(threads), 0, stream>>>(
      tasks, partials, num_kv_heads, group, head_dim, out, out_float);
  check_launch("attention_combine_kernel");
}

}  // namespace oscar::cuda
