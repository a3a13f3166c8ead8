#pragma once
// Merges the partial records of each (row, KV head) into the attention output
// (attention_combine.cu).
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "backend/cuda/step_work.h"

namespace oscar::cuda {

// out[row][kv_head * group + g][D] = sum_s o_s 2^(m_s - M) / sum_s l_s 2^(m_s - M), as bf16 (the
// output projection's input) and, when `out_float` is given, as float. `max_splits` bounds the
// splits of a row (CombineTask::count); it sets how many threads share a row's splits.
void launch_attention_combine(const CombineTask* tasks, int64_t rows, int64_t max_splits,
                              const float* partials, int num_kv_heads, int group, int head_dim,
                              __nv_bfloat16* out, float* out_float, cudaStream_t stream);

}  // namespace oscar::cuda
