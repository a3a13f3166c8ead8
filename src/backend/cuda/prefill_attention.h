#pragma once
// Tiled causal GQA attention for blocks of query rows (prefill_attention.cu): prefill chunks over a
// bf16 and a quantized prefix (chunked prefill, prefix-cache hits) and, split over key ranges, the
// decode rows of formats the decode kernel does not cover (KIVI keys). Float math on every format.
#include <cuda_runtime.h>

#include "backend/cuda/attention_args.h"

namespace oscar::cuda {

// Processes args.counts->block_items x num_kv_heads work units with `grid_blocks` blocks.
void launch_prefill_attention(const AttentionArgs& args, int grid_blocks, cudaStream_t stream);

// Blocks of the persistent kernel that fit on the device at once.
int prefill_attention_resident_blocks();

}  // namespace oscar::cuda
