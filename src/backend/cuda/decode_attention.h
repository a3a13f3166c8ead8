#pragma once
// Paged split-K decode attention (decode_attention.cu): one query token per row, all query heads of
// a GQA group per KV head, bf16 pages, INT2/INT4 per-token-group pages and the INT4 band pages
// behind an INT2 cache's window, unpacked in registers.
#include <cuda_runtime.h>

#include "backend/cuda/attention_args.h"

namespace oscar::cuda {

// head_dim 128, group 1..8, page size a multiple of 16, bf16 or INT2/INT4 with per-token groups
// (KIVI's per-channel keys go to the block kernel).
bool decode_attention_supports(const PageLayout& layout, int group);

// Blocks of the persistent kernel that fit on the device at once.
int decode_attention_resident_blocks(const PageLayout& layout);

// Processes args.counts->decode_items x num_kv_heads work units with `grid_blocks` blocks.
void launch_decode_attention(const AttentionArgs& args, int grid_blocks, cudaStream_t stream);

}  // namespace oscar::cuda
