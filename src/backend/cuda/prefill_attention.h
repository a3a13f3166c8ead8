#pragma once
// Causal GQA attention of prefill chunks on the tensor cores (prefill_attention.cu), and the
// dequantization of the quantized pages they read into bf16 scratch pages (kv_dequantize.cu).
#include <cuda.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "backend/cuda/attention_args.h"

namespace oscar::cuda {

// One block per (block item, KV head): `block_items` items, each reading its keys from
// args.prefill_pages (full precision from args.full_pages, 2-bit and band keys from their bf16
// copies in args.scratch_pages) under the decode rule, writing its rows' partial records. The two
// arenas are read through their tensor maps (page_tensor_map.h).
void launch_prefill_attention(const AttentionArgs& args, int64_t block_items,
                              const CUtensorMap& full_map, const CUtensorMap& scratch_map,
                              cudaStream_t stream);

// The tasks' quantized pages (in `layout`, from `quantized_pages`) into bf16 scratch pages laid out
// as `layout`'s full-precision pages, every KV head: the tasks' slots dequantized, the others zero.
void launch_kv_dequantize(const PageLayout& layout, const std::byte* quantized_pages,
                          const DequantizeTask* tasks, int64_t task_count, const float* q8_scales,
                          std::byte* scratch_pages, cudaStream_t stream);

}  // namespace oscar::cuda
