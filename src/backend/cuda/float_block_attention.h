#pragma once
// Tiled causal GQA attention for blocks of query rows in float math, reading every page format in
// place (float_block_attention.cu): the prefill chunks and, split over key ranges, the decode rows
// of the formats that neither the decode kernel nor the tensor-core prefill kernel read (KIVI's
// keys quantized per channel).
#include <cuda_runtime.h>

#include "backend/cuda/attention_args.h"

namespace oscar::cuda {

// Processes args.counts->block_items x num_kv_heads work units with `grid_blocks` blocks.
void launch_float_block_attention(const AttentionArgs& args, int grid_blocks, cudaStream_t stream);

// Blocks of the persistent kernel that fit on the device at once.
int float_block_attention_resident_blocks();

}  // namespace oscar::cuda
