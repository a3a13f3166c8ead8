// Merges split attention results. Mirrors the softmax normalisation at the end of cpu_attention
// (backend/cpu/cpu_attention.cpp): the splits' maxima are reconciled (log-sum-exp), then the
// weighted values are divided by the total weight.
#include "backend/cuda/attention_combine.h"

#include "backend/cuda/cuda_check.h"

namespace oscar::cuda {
namespace {

// One block per (row, KV head), one thread per channel.
__global__ void attention_combine_kernel(const CombineTask* tasks, const float* partials, int num_kv_heads,
                                         int group, int head_dim, __nv_bfloat16* out, float* out_float) {
  const int row = blockIdx.x / num_kv_heads, kv_head = blockIdx.x % num_kv_heads;
  const CombineTask task = tasks[row];
  const int64_t record_floats = int64_t(group) * (head_dim + 2);
  const float* first = partials + int64_t(task.first + kv_head) * record_floats;
  const int64_t stride = int64_t(task.stride) * record_floats;
  for (int ch = threadIdx.x; ch < head_dim; ch += blockDim.x) {
    for (int g = 0; g < group; ++g) {
      float max = -INFINITY;
      for (int s = 0; s < task.count; ++s) max = fmaxf(max, first[s * stride + g]);
      float sum = 0.0f, value = 0.0f;
      for (int s = 0; s < task.count; ++s) {
        const float* record = first + s * stride;
        const float f = exp2f(record[g] - max);
        sum += record[group + g] * f;
        value += record[2 * group + g * head_dim + ch] * f;
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
  attention_combine_kernel<<<unsigned(rows * num_kv_heads), 128, 0, stream>>>(
      tasks, partials, num_kv_heads, group, head_dim, out, out_float);
  check_launch("attention_combine_kernel");
}

}  // namespace oscar::cuda
